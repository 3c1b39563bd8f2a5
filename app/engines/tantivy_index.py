"""The embedded BM25 lexical index: tantivy in process, persisted in one folder.

Analysis is English: split on non-alphanumerics, drop tokens over 40 chars, lowercase, Lucene's 33
English stop words, Snowball English stemmer (close to OpenSearch's `english` analyzer). Scores are
tantivy's BM25 (k1=1.2, b=0.75), on the same scale as OpenSearch's default similarity.

User text never reaches tantivy's query parser: this module analyzes it into plain terms and builds
the query tree itself, so `foo:(bar*` or an unbalanced quote is just the words `foo` and `bar`.
Filters are zero-scoring clauses, so a filtered hit keeps the BM25 score it has unfiltered.

The content field holds the chunk's breadcrumb and text in one field, and a low-boost `context`
field its own context (`app.engines.lexical_context`). Chunk tags are searched as words too
(`tags_text`), so a `#networking` query finds chunks tagged `networking` whose text never says it.

The folder records the version of what this module files in it (`SCHEMA_VERSION_FILE`). A folder
written by an older version (a lower number, or none: versions before the file existed) is emptied
and recreated at open, with a warning: PostgreSQL is the source of truth, and the service re-queues
every project (or `poimen reindex --project <id>` refills one). A folder from a newer version is
refused rather than downgraded, and a folder holding some other tantivy index is never touched.

One process owns the writer (tantivy's lockfile refuses a second one, in any process); it is opened
on the first write and kept. A refused or failed write raises `EngineUnavailableError` and the next
write tries again, so a writer freed later is picked up without a restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, NoReturn

import tantivy

from app.domain.errors import EngineUnavailableError
from app.domain.models import Chunk, ScoredHit
from app.engines.lexical_context import DEFAULT_CONTEXT_BOOST, DEFAULT_CONTEXT_MAX_CHARS, lexical_text

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from pathlib import Path

    from app.domain.models import DocumentChunks, Filters, LexicalQuery

logger = logging.getLogger(__name__)

ENGINE_NAME = "tantivy"
ANALYZER_NAME = "poimen_english"
DOCUMENT_KEY_SEPARATOR = "\x1f"  # project ids are [A-Za-z0-9._-], so the key cannot be ambiguous
MAX_TOKEN_CHARS = 40  # longer "words" are hashes, base64 or URLs: noise for BM25
FUZZY_MIN_TERM_CHARS = 3  # OpenSearch AUTO fuzziness allows no edit below 3 characters
DEFAULT_WRITER_HEAP_BYTES = 50_000_000  # tantivy needs >= 15 MB per indexing thread

SCHEMA_VERSION = 2
"""What this module files in its folder. 1: title fields apart and neighbour context (no version file)."""
SCHEMA_VERSION_FILE = "poimen-schema-version"

# Fields searched by the free text; each is analyzed with the English analyzer.
CONTENT = "content"  # the chunk's breadcrumb and text (app.engines.lexical_context)
SOURCE = "source"
TAGS_TEXT = "tags_text"  # the tags as words; `TAGS` below keeps the exact values for filters
CONTEXT = "context"  # the chunk's own context (app.engines.lexical_context), low boost
# Keyword fields (raw tokenizer, exact values) used by filters and deletes.
SOURCE_KEYWORD = "source_keyword"
PROJECT_ID = "project_id"
DOCUMENT_ID = "document_id"
DOCUMENT_KEY = "document_key"
CHUNK_ID = "chunk_id"
LEVEL = "level"
TAGS = "tags"
# Microseconds since the epoch: tantivy indexes date fields at second precision, which would make a
# `[from, to)` bound disagree with the vector leg's microsecond timestamps.
EVENT_TIME_US = "event_time_us"
# The whole chunk as JSON, stored only: the hit is rebuilt from it, field for field.
PAYLOAD = "payload"
SCHEMA_FIELD_NAMES = frozenset(
    {
        *(CONTENT, SOURCE, TAGS_TEXT, CONTEXT),
        *(SOURCE_KEYWORD, PROJECT_ID, DOCUMENT_ID, DOCUMENT_KEY, CHUNK_ID, LEVEL, TAGS),
        *(EVENT_TIME_US, PAYLOAD),
    }
)
"""Every field `build_schema()` declares; a test keeps the two equal."""


@dataclass(frozen=True, slots=True)
class FieldBoosts:
    """Per-field weights of the free-text terms (the reference `multi_match` has content^2, title^1.5).

    The title and section path are not fields of their own: they lead the content field
    (`titled_text`). Scored apart at content's weight they outranked the text, and in one field they
    did better on both data sets (SciFact train lexical nDCG@10 0.673 -> 0.704, LoCoMo tuning
    Recall@10 0.687 -> 0.706; docs/evaluation.md). Tags weigh 1.0 like the source, half the content:
    a tag names what a whole document is about, so a tag match should find the chunk without
    outranking one that discusses it. `fuzzy` is the constant score of a term matched only within one
    edit (an exact match scores BM25). `context` weighs the chunk's own context: low, so a term found
    only there ranks the chunk below one that says it itself (tuned in docs/evaluation.md).
    """

    content: float = 2.0
    source: float = 1.0
    tags: float = 1.0
    context: float = DEFAULT_CONTEXT_BOOST
    fuzzy: float = 0.5

    def own_fields(self) -> tuple[tuple[str, float], ...]:
        """The free-text fields of the chunk itself with their boosts (what an excluded term checks)."""
        return (
            (CONTENT, self.content),
            (SOURCE, self.source),
            (TAGS_TEXT, self.tags),
        )

    def searched_fields(self) -> tuple[tuple[str, float], ...]:
        """Every free-text field a query term is scored on, with its boost (a zero boost is skipped)."""
        fields = self.own_fields()
        return (*fields, (CONTEXT, self.context)) if self.context > 0 else fields


def build_english_analyzer() -> tantivy.TextAnalyzer:
    """The analyzer used for indexing and for queries: the two must never differ."""
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.remove_long(MAX_TOKEN_CHARS))
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.stopword("english"))
        .filter(tantivy.Filter.stemmer("english"))
        .build()
    )


def build_schema() -> tantivy.Schema:
    """The index schema. A folder built with another version is recreated empty at open (see the module doc)."""
    builder = tantivy.SchemaBuilder()
    for field in (CONTENT, SOURCE, TAGS_TEXT, CONTEXT):
        builder.add_text_field(field, stored=False, tokenizer_name=ANALYZER_NAME, index_option="position")
    for field in (SOURCE_KEYWORD, PROJECT_ID, DOCUMENT_ID, DOCUMENT_KEY, CHUNK_ID, LEVEL, TAGS):
        builder.add_text_field(field, stored=False, tokenizer_name="raw", index_option="basic")
    builder.add_integer_field(EVENT_TIME_US, stored=False, indexed=True, fast=True)
    builder.add_bytes_field(PAYLOAD, stored=True, indexed=False)
    return builder.build()


def document_key(project_id: str, document_id: str) -> str:
    """The raw term every chunk of one document shares, for delete-by-document."""
    return f"{project_id}{DOCUMENT_KEY_SEPARATOR}{document_id}"


def epoch_microseconds(moment: datetime) -> int:
    """Whole microseconds since the Unix epoch; a naive datetime is taken as UTC."""
    aware = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    delta = aware - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def encode_chunk(chunk: Chunk) -> bytes:
    """The stored payload of a chunk (JSON), decoded by `decode_chunk`."""
    return json.dumps(
        {
            "chunk_id": chunk.chunk_id,
            "document_id": chunk.document_id,
            "project_id": chunk.project_id,
            "text": chunk.text,
            "source": chunk.source,
            "level": chunk.level,
            "breadcrumb": list(chunk.breadcrumb),
            "section_title": chunk.section_title,
            "position": chunk.position,
            "tags": list(chunk.tags),
            "event_time": chunk.event_time.isoformat() if chunk.event_time is not None else None,
            "chunk_hash": chunk.chunk_hash,
        },
        ensure_ascii=False,
    ).encode()


def decode_chunk(payload: bytes) -> Chunk:
    """Rebuild the chunk `encode_chunk` stored."""
    data: dict[str, Any] = json.loads(payload)
    event_time = data["event_time"]
    return Chunk(
        chunk_id=data["chunk_id"],
        document_id=data["document_id"],
        project_id=data["project_id"],
        text=data["text"],
        source=data["source"],
        level=data["level"],
        breadcrumb=tuple(data["breadcrumb"]),
        section_title=data["section_title"],
        position=data["position"],
        tags=tuple(data["tags"]),
        event_time=datetime.fromisoformat(event_time) if event_time is not None else None,
        chunk_hash=data["chunk_hash"],
    )


def _regex_literal(text: str) -> str:
    r"""`text` as a regex matching itself: every non-alphanumeric becomes a `\x{..}` escape."""
    return "".join(char if char.isalnum() else f"\\x{{{ord(char):x}}}" for char in text)


class TantivyLexicalIndex:
    """`LexicalIndex` on an on-disk tantivy index (e.g. `POIMEN_DATA_DIR/lexical`).

    Searches and writes (fsync on commit) run in worker threads; writes one at a time. After `close()` every call
    raises `EngineUnavailableError`.
    """

    name = ENGINE_NAME

    def __init__(
        self,
        path: Path,
        *,
        boosts: FieldBoosts | None = None,
        writer_heap_bytes: int = DEFAULT_WRITER_HEAP_BYTES,
        context_max_chars: int = DEFAULT_CONTEXT_MAX_CHARS,
    ) -> None:
        """Open the index in `path`, creating the folder and an empty index when missing.

        Raises:
            EngineUnavailableError: the folder cannot be used (unreadable, or built with another schema).
        """
        self._path = path
        self._boosts = boosts or FieldBoosts()
        self._writer_heap_bytes = writer_heap_bytes
        self._context_max_chars = context_max_chars
        self._analyzer = build_english_analyzer()
        self._schema = build_schema()
        self._write_lock = asyncio.Lock()
        self._writer: tantivy.IndexWriter | None = None
        self._closed = False
        self._recreated = False
        try:
            path.mkdir(parents=True, exist_ok=True)
            version = _stored_schema_version(path)
            self._recreated = _empty_if_older(path, version)
            self._index: tantivy.Index | None = tantivy.Index(self._schema, path=str(path), reuse=True)
            self._index.register_tokenizer(ANALYZER_NAME, self._analyzer)
            if version != SCHEMA_VERSION:
                (path / SCHEMA_VERSION_FILE).write_text(f"{SCHEMA_VERSION}\n", encoding="ascii")
        except (OSError, ValueError, RuntimeError) as error:
            _raise_unavailable(f"cannot open the lexical index in {path}", error)

    @property
    def path(self) -> Path:
        """The folder holding the index."""
        return self._path

    @property
    def recreated(self) -> bool:
        """True when opening found an older schema and emptied the folder: every project needs a reindex."""
        return self._recreated

    async def search(self, query: LexicalQuery, *, top_k: int, filters: Filters) -> list[ScoredHit]:
        """Return at most `top_k` chunks of `filters.project_id` matching `query`, best BM25 first.

        The search runs in a worker thread: tantivy releases the GIL, so it overlaps the query
        embedding, and a caller's deadline can abandon a slow search instead of waiting for it.
        """
        index = self._open_index()
        if top_k <= 0:
            return []
        return await asyncio.to_thread(self._search_blocking, index, query, top_k, filters)

    def _search_blocking(
        self, index: tantivy.Index, query: LexicalQuery, top_k: int, filters: Filters
    ) -> list[ScoredHit]:
        try:
            tantivy_query = self._build_query(query, filters)
            if tantivy_query is None:
                return []
            searcher = index.searcher()
            found = searcher.search(tantivy_query, top_k, count=False).hits
            hits = [
                ScoredHit(chunk=decode_chunk(searcher.doc(address)[PAYLOAD][0]), score=score)
                for score, address in found
            ]
        except (ValueError, RuntimeError, OSError) as error:
            _raise_unavailable("lexical search failed", error)
        except BaseException as error:  # noqa: BLE001 - pyo3's PanicException is a BaseException with no importable name
            _reraise_unless_panic(error)
            _raise_unavailable("lexical search failed", error)
        hits.sort(key=lambda hit: (-hit.score, hit.chunk_id))
        return hits

    async def replace_documents(self, documents: Sequence[DocumentChunks]) -> None:
        """Replace each document's chunks with its current set, then commit once and refresh readers."""
        if not documents:
            self._open_index()
            return

        def write(writer: tantivy.IndexWriter) -> None:
            for document in documents:
                writer.delete_documents_by_term(DOCUMENT_KEY, document_key(document.project_id, document.document_id))
                for chunk in document.chunks:
                    writer.add_document(self._to_tantivy_document(chunk))

        await self._write(write, "replacing documents in the lexical index failed")

    async def delete_project(self, project_id: str) -> None:
        """Remove every chunk of `project_id` and commit."""

        def write(writer: tantivy.IndexWriter) -> None:
            writer.delete_documents_by_term(PROJECT_ID, project_id)

        await self._write(write, f"deleting project {project_id!r} from the lexical index failed")

    async def ping(self) -> None:
        """Return when the index can be searched; raise `EngineUnavailableError` otherwise."""
        index = self._open_index()
        try:
            index.searcher()
        except (ValueError, RuntimeError, OSError) as error:
            _raise_unavailable("lexical index does not answer", error)

    async def close(self) -> None:
        """Wait for the running write, release the writer lock and make every later call fail."""
        async with self._write_lock:
            self._closed = True
            writer, self._writer, self._index = self._writer, None, None
            if writer is not None:
                # Consumes the writer: finishes merges and frees the lockfile for another process. A
                # failure is ignored: we are closing anyway, and the lock goes with the writer object.
                with contextlib.suppress(ValueError, RuntimeError, OSError):
                    await asyncio.to_thread(writer.wait_merging_threads)

    # --- writing -------------------------------------------------------------------------------

    async def _write(self, operations: Callable[[tantivy.IndexWriter], None], failure: str) -> None:
        async with self._write_lock:
            index = self._open_index()
            work = asyncio.ensure_future(asyncio.to_thread(self._write_blocking, index, operations, failure))
            try:
                await asyncio.shield(work)
            except asyncio.CancelledError:
                # A thread cannot be stopped: keep the lock until it ends, so two batches never share
                # the writer, then let the cancellation through.
                await asyncio.wait({work})
                if not work.cancelled():
                    work.exception()  # retrieved, so asyncio does not log it as never retrieved
                raise

    def _write_blocking(
        self, index: tantivy.Index, operations: Callable[[tantivy.IndexWriter], None], failure: str
    ) -> None:
        writer = self._acquire_writer(index)
        try:
            operations(writer)
            writer.commit()
        except (ValueError, RuntimeError, OSError) as error:
            self._abandon_batch(writer)
            _raise_unavailable(failure, error)
        except BaseException as error:  # noqa: BLE001 - see `search`
            _reraise_unless_panic(error)
            self._abandon_batch(writer)
            _raise_unavailable(failure, error)
        try:
            index.reload()
        except (ValueError, RuntimeError, OSError) as error:
            _raise_unavailable("the lexical index committed but readers did not refresh", error)

    def _acquire_writer(self, index: tantivy.Index) -> tantivy.IndexWriter:
        if self._writer is None:
            try:
                self._writer = index.writer(heap_size=self._writer_heap_bytes, num_threads=1)
            except ValueError as error:
                _raise_unavailable(f"cannot take the lexical index writer in {self._path}", error)
        return self._writer

    def _abandon_batch(self, writer: tantivy.IndexWriter) -> None:
        """Drop the uncommitted operations; if even that fails, drop the writer so the next write reopens it."""
        try:
            writer.rollback()
        except (ValueError, RuntimeError, OSError):
            self._writer = None

    def _to_tantivy_document(self, chunk: Chunk) -> tantivy.Document:
        text = lexical_text(chunk, context_max_chars=self._context_max_chars)
        document = tantivy.Document()
        document.add_text(CONTENT, text.content)
        document.add_text(CONTEXT, text.context)
        document.add_text(SOURCE, chunk.source)
        for tag in chunk.tags:
            document.add_text(TAGS_TEXT, tag)
        document.add_text(SOURCE_KEYWORD, chunk.source)
        document.add_text(PROJECT_ID, chunk.project_id)
        document.add_text(DOCUMENT_ID, chunk.document_id)
        document.add_text(DOCUMENT_KEY, document_key(chunk.project_id, chunk.document_id))
        document.add_text(CHUNK_ID, chunk.chunk_id)
        document.add_text(LEVEL, chunk.level)
        for tag in chunk.tags:
            document.add_text(TAGS, tag)
        if chunk.event_time is not None:
            document.add_integer(EVENT_TIME_US, epoch_microseconds(chunk.event_time))
        document.add_bytes(PAYLOAD, encode_chunk(chunk))
        return document

    # --- querying ------------------------------------------------------------------------------

    def _open_index(self) -> tantivy.Index:
        if self._closed or self._index is None:
            message = "the lexical index is closed"
            raise EngineUnavailableError(message, engine=ENGINE_NAME)
        return self._index

    def _build_query(self, query: LexicalQuery, filters: Filters) -> tantivy.Query | None:
        """The whole query tree, or None when nothing can match (no searchable term, empty chunk_ids)."""
        text_query = self._text_query(query)
        filter_clauses = self._filter_clauses(filters)
        if text_query is None or filter_clauses is None:
            return None
        clauses = [(tantivy.Occur.Must, text_query)]
        clauses.extend((tantivy.Occur.Must, tantivy.Query.const_score_query(clause, 0.0)) for clause in filter_clauses)
        clauses.extend((tantivy.Occur.MustNot, clause) for clause in self._excluded_clauses(query.excluded_terms))
        return tantivy.Query.boolean_query(clauses)

    def _text_query(self, query: LexicalQuery) -> tantivy.Query | None:
        """OR of the analyzed terms over the searched fields, AND every phrase; None when both are empty."""
        clauses = [
            (tantivy.Occur.Should, self._term_clause(term, fuzzy=query.fuzzy))
            for term in dict.fromkeys(self._analyzer.analyze(query.text))
        ]
        for phrase in query.phrases:
            phrase_query = self._phrase_query(CONTENT, phrase)
            if phrase_query is not None:
                clauses.append((tantivy.Occur.Must, tantivy.Query.boost_query(phrase_query, self._boosts.content)))
        if not clauses:
            return None
        return tantivy.Query.boolean_query(clauses)

    def _term_clause(self, term: str, *, fuzzy: bool) -> tantivy.Query:
        """One analyzed term: the sum of its boosted BM25 over every searched field.

        With `fuzzy`, a term within one edit in the content also matches, at a small constant score
        that an exact match (scored by BM25 through the max) never falls below.
        """
        exact = tantivy.Query.boolean_query(
            [
                (
                    tantivy.Occur.Should,
                    tantivy.Query.boost_query(tantivy.Query.term_query(self._schema, field, term), boost),
                )
                for field, boost in self._boosts.searched_fields()
            ]
        )
        if not fuzzy or len(term) < FUZZY_MIN_TERM_CHARS:
            return exact
        near = tantivy.Query.fuzzy_term_query(self._schema, CONTENT, term, distance=1)
        return tantivy.Query.disjunction_max_query([exact, tantivy.Query.boost_query(near, self._boosts.fuzzy)])

    def _phrase_query(self, field: str, phrase: str) -> tantivy.Query | None:
        """The analyzed words of `phrase` at their relative positions (a dropped stop word leaves a gap)."""
        tokens = self._analyzer.pre_tokenize(phrase).tokens
        if not tokens:
            return None
        if len(tokens) == 1:
            # tantivy panics on a one-word phrase query; a term query means the same.
            return tantivy.Query.term_query(self._schema, field, tokens[0].text)
        first = tokens[0].position
        return tantivy.Query.phrase_query(
            self._schema, field, [(token.position - first, token.text) for token in tokens]
        )

    def _excluded_clauses(self, excluded_terms: Sequence[str]) -> list[tantivy.Query]:
        """One clause per excluded term (a multi-word one as a phrase), over the chunk's own fields.

        A term only the context holds (e.g. the previous turn's words) does not exclude the chunk.
        """
        clauses = []
        for excluded in excluded_terms:
            for field, _ in self._boosts.own_fields():
                field_query = self._phrase_query(field, excluded)
                if field_query is not None:
                    clauses.append(field_query)
        return clauses

    def _filter_clauses(self, filters: Filters) -> list[tantivy.Query] | None:
        """Clauses every hit must satisfy, or None when `filters` can match nothing."""
        if filters.chunk_ids is not None and not filters.chunk_ids:
            return None
        schema = self._schema
        clauses = [tantivy.Query.term_query(schema, PROJECT_ID, filters.project_id)]
        if filters.levels:
            clauses.append(tantivy.Query.term_set_query(schema, LEVEL, list(filters.levels)))
        clauses.extend(tantivy.Query.term_query(schema, TAGS, tag) for tag in dict.fromkeys(filters.tags))
        if filters.source_prefix:
            clauses.append(
                tantivy.Query.regex_query(schema, SOURCE_KEYWORD, _regex_literal(filters.source_prefix) + "(?s:.)*")
            )
        if filters.event_time_from is not None or filters.event_time_to is not None:
            clauses.append(self._time_window_clause(filters))
        if filters.chunk_ids is not None:
            clauses.append(tantivy.Query.term_set_query(schema, CHUNK_ID, list(filters.chunk_ids)))
        return clauses

    def _time_window_clause(self, filters: Filters) -> tantivy.Query:
        """`[event_time_from, event_time_to)`, or an undated chunk too when `filters.include_undated`."""
        lower = epoch_microseconds(filters.event_time_from) if filters.event_time_from is not None else None
        upper = epoch_microseconds(filters.event_time_to) if filters.event_time_to is not None else None
        window = tantivy.Query.range_query(
            self._schema,
            EVENT_TIME_US,
            tantivy.FieldType.Integer,
            lower_bound=lower,
            upper_bound=upper,
            include_lower=True,
            # tantivy rejects an exclusive unbounded side; `to` itself is exclusive.
            include_upper=upper is None,
        )
        if not filters.include_undated:
            return window
        undated = tantivy.Query.boolean_query(
            [
                (tantivy.Occur.Must, tantivy.Query.all_query()),
                (tantivy.Occur.MustNot, tantivy.Query.exists_query(EVENT_TIME_US)),
            ]
        )
        return tantivy.Query.boolean_query([(tantivy.Occur.Should, window), (tantivy.Occur.Should, undated)])


def _stored_schema_version(path: Path) -> int | None:
    """The `SCHEMA_VERSION` that wrote the index in `path`; None when the folder holds no index of this module.

    "Of this module" means its schema has the `payload` and `document_key` fields. An index without a
    version file predates the file: version 1.

    Raises:
        ValueError: the version file holds no number.
    """
    try:
        stored = json.loads((path / "meta.json").read_text())
        names = {field["name"] for field in stored["schema"]}
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not {PAYLOAD, DOCUMENT_KEY} <= names:
        return None
    try:
        return int((path / SCHEMA_VERSION_FILE).read_text(encoding="ascii").strip())
    except FileNotFoundError:
        return 1


def _empty_if_older(path: Path, version: int | None) -> bool:
    """Empty `path` when its index is of an older `SCHEMA_VERSION` (True); refuse a newer one.

    Raises:
        ValueError: the index was written by a newer version of this module.
    """
    if version is not None and version > SCHEMA_VERSION:
        msg = f"it was written by a newer version (schema {version}, this one reads {SCHEMA_VERSION})"
        raise ValueError(msg)
    if version is None or version == SCHEMA_VERSION:
        return False
    _empty_folder(path)
    logger.warning(
        "the lexical index in %s had an older schema and was recreated empty; refill it from "
        "PostgreSQL with `poimen reindex --project <id>` for each project",
        path,
    )
    return True


def _empty_folder(path: Path) -> None:
    """Delete the index files in `path`, keeping the folder itself (it may be a mount point)."""
    for entry in path.iterdir():
        if entry.is_dir():
            msg = f"{entry} is a folder; an index folder holds only files"
            raise OSError(msg)
        entry.unlink()


def _raise_unavailable(message: str, error: BaseException) -> NoReturn:
    detail = f"{message}: {error}"
    raise EngineUnavailableError(detail, engine=ENGINE_NAME) from error


def _reraise_unless_panic(error: BaseException) -> None:
    """Let everything but a tantivy Rust panic propagate (pyo3's PanicException is a BaseException)."""
    if type(error).__name__ != "PanicException":
        raise error
