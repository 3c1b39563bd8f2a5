"""OpenSearch request bodies, built by pure functions: BM25 query DSL, bulk index actions, delete queries.

Golden tests pin them without a server (`tests/unit/test_opensearch_bodies.py`). The documents a
chunk is stored as use `app.engines.chunk_codec` (its text as `content`, the reference mapping's
name), plus the fields only searches read (`app.engines.opensearch_mapping`).

Writes are versioned by the outbox (`DocumentChunks.outbox_version`), so several outbox workers can
write one index and the newest snapshot of a document wins whatever order their requests land in:
each chunk is indexed with `version_type=external_gte` on the outbox version (OpenSearch refuses an
older version with a 409 and replays an equal one), and stores that version as `outbox_version`, so
deletes only match chunks older than the writer. A snapshot without a version (tests, tools outside
the outbox) writes and deletes unconditionally, as before versioning; its chunks count as the oldest.
Chunk versions alone cannot refuse a stale write of chunk ids the newer snapshot never had: the
per-document version markers of `app.engines.opensearch_markers` do.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from typing import TYPE_CHECKING, Any, Final

from app.domain.tags import tag_keys
from app.engines.chunk_codec import chunk_to_record
from app.engines.lexical_context import DEFAULT_CONTEXT_BOOST, lexical_text

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from datetime import datetime

    from app.domain.models import Chunk, DocumentChunks, Filters, LexicalQuery

CONTENT_BOOST: Final = 2.0
CONTEXT_BOOST: Final = DEFAULT_CONTEXT_BOOST
SEARCH_FIELDS: Final = (
    f"titled_content^{CONTENT_BOOST:g}",
    "source",
    "tags.text",
    f"context^{CONTEXT_BOOST:g}",
)
"""As tantivy: the titled content counts twice, source and tags as words once, the context at a low boost."""

_UNBOOSTED_FIELDS: Final = ("titled_content", "source", "tags.text")
SOURCE_FIELDS: Final = (
    "chunk_id",
    "document_id",
    "project_id",
    "content",
    "source",
    "level",
    "breadcrumb",
    "section_title",
    "position",
    "tags",
    "event_time",
    "chunk_hash",
)
"""`_source` fields a hit returns: exactly what rebuilds a `Chunk`."""

VERSION_FIELD: Final = "outbox_version"
"""The `_source` field holding the outbox version a chunk was written at (absent: written unversioned)."""
VERSION_TYPE: Final = "external_gte"
"""Equal versions replay (a retried batch is idempotent), older ones are refused with a 409."""

FUZZY_MAX_EXPANSIONS: Final = 50
MAX_QUERY_TOKENS: Final = 200
"""Terms of free text one search sends: each is a clause per searched field (four), and OpenSearch refuses a
query of more than 1,024 clauses (`indices.query.bool.max_clause_count`). A paragraph of 1,000 words failed
the lexical leg; tantivy takes them all. Counted as the standard tokenizer splits (`_query_pieces`)."""
# What the standard tokenizer makes a term of: one Han, kana or Hangul character each; else a run of letters
# and digits, so `w0-w1` and `error:timeout` are two.
_CJK: Final = "\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff"
_PIECE: Final = re.compile(f"[{_CJK}]|[^\\s{_CJK}]+")
_TERM: Final = re.compile(r"[^\W_]+")
TEXT_FIELD: Final = "content"
"""The `_source` field of the chunk's text (the reference mapping's name)."""


def document_key(project_id: str, chunk_id: str) -> str:
    """The `_id` of a chunk: project-qualified, so equal chunk ids of two projects never collide.

    Project ids cannot contain `:` (`PROJECT_ID_PATTERN`), so the key is unambiguous.
    """
    return bounded_key(f"{project_id}:{chunk_id}")


MAX_ID_BYTES: Final = 512
"""OpenSearch refuses an `_id` longer than this in UTF-8; a 256-character document id of CJK is 768 bytes."""
LONG_KEY_PREFIX: Final = "@sha256:"


def bounded_key(key: str) -> str:
    """`key` as an `_id`: itself when OpenSearch takes it, else `@sha256:` and its digest.

    A refused `_id` failed its whole bulk request, again on every retry, and with it the indexing of every
    project queued behind it. No project id starts with `@`, and markers are `@version-marker:...`, so a
    digest key is never another key.
    """
    encoded = key.encode()
    return key if len(encoded) <= MAX_ID_BYTES else LONG_KEY_PREFIX + hashlib.sha256(encoded).hexdigest()


MAX_PREFIX_CHARS: Final = 1000
"""The longest `prefix` query OpenSearch runs: `index.max_regex_length` (1,000 by default), in UTF-16 code units."""


def build_filter_clauses(filters: Filters) -> list[dict[str, Any]]:
    """The `bool.filter` clauses: project always, then levels, every tag, source prefix, dates, ids.

    Dates and a long source prefix select a superset when the index cannot hold the filter exactly
    (`needs_exact_check`): the search keeps the hits `app.domain.chunk_filters` accepts.
    """
    clauses: list[dict[str, Any]] = [{"term": {"project_id": filters.project_id}}]
    if filters.levels:
        clauses.append({"terms": {"level": list(filters.levels)}})
    clauses.extend({"term": {"tags.key": key}} for key in tag_keys(filters.tags))  # all-of: one clause per tag
    if filters.source_prefix:
        clauses.append({"prefix": {"source.raw": _indexable_prefix(filters.source_prefix)}})
    date_range: dict[str, str] = {}
    # A `date` field is kept to the millisecond: a bound within one selects its whole millisecond.
    if filters.event_time_from is not None:
        date_range["gte"] = _to_millisecond(filters.event_time_from).isoformat()
    if filters.event_time_to is not None:
        end = filters.event_time_to
        date_range["lt" if end == _to_millisecond(end) else "lte"] = _to_millisecond(end).isoformat()
    if date_range:
        window: dict[str, Any] = {"range": {"event_time": date_range}}
        if filters.include_undated:
            undated = {"bool": {"must_not": [{"exists": {"field": "event_time"}}]}}
            window = {"bool": {"should": [window, undated], "minimum_should_match": 1}}
        clauses.append(window)
    if filters.chunk_ids is not None:
        clauses.append({"terms": {"chunk_id": sorted(filters.chunk_ids)}})
    return clauses


def needs_exact_check(filters: Filters) -> bool:
    """Whether `build_filter_clauses` selects more than `filters` do: a bound within a millisecond, a long prefix.

    The `event_time` field is a `date`, kept to the millisecond (`date_nanos` cannot hold a time before 1970),
    where times are kept to the microsecond; a prefix longer than `MAX_PREFIX_CHARS` is refused.
    """
    bounds = (filters.event_time_from, filters.event_time_to)
    prefix = filters.source_prefix or ""
    return any(bound is not None and bound.microsecond % 1000 for bound in bounds) or prefix != _indexable_prefix(
        prefix
    )


def _to_millisecond(moment: datetime) -> datetime:
    return moment.replace(microsecond=moment.microsecond - moment.microsecond % 1000)


def _indexable_prefix(prefix: str) -> str:
    """`prefix` cut to its longest start OpenSearch takes in a `prefix` query (`MAX_PREFIX_CHARS` UTF-16 units)."""
    units = 0
    for position, character in enumerate(prefix):
        units += len(character.encode("utf-16-le")) // 2  # a character past U+FFFF is two units
        if units > MAX_PREFIX_CHARS:
            return prefix[:position]
    return prefix


def build_search_body(query: LexicalQuery, *, top_k: int, filters: Filters) -> dict[str, Any]:
    """The `_search` body: BM25 `multi_match` (best_fields), phrases, filters and exclusions.

    Free text is an OR over its words (each once, or as often as it occurs with `weigh_repeats`);
    every phrase must occur in the titled content (`match_phrase`, boosted like content); a chunk with
    an excluded term in any searched field is dropped (`must_not`). `multi_match` never parses query
    syntax, so `:`, `(`, `*` and quotes are plain text. Ties on score break on `chunk_id`, ascending.
    """
    must: list[dict[str, Any]] = []
    # Lucene adds up a word the query repeats; without `weigh_repeats` a word counts once, as in tantivy.
    text = query.text.strip() if query.weigh_repeats else " ".join(dict.fromkeys(query.text.split()))
    text = within_clause_budget(text)
    if text:
        text_match: dict[str, Any] = {
            "query": text,
            "fields": list(SEARCH_FIELDS),
            "type": "best_fields",
            "operator": "or",
        }
        if query.fuzzy:
            text_match |= {"fuzziness": "AUTO", "max_expansions": FUZZY_MAX_EXPANSIONS}
        must.append({"multi_match": text_match})
    must.extend(
        {"match_phrase": {"titled_content": {"query": phrase, "boost": CONTENT_BOOST}}}
        for phrase in dict.fromkeys(query.phrases)
        if phrase.strip()
    )
    boolean: dict[str, Any] = {"must": must, "filter": build_filter_clauses(filters)}
    excluded = [term for term in dict.fromkeys((*query.excluded_terms, *filters.excluded_terms)) if term.strip()]
    if excluded:
        # `phrase` type: a multi-word exclusion excludes the phrase, not each of its words.
        boolean["must_not"] = [
            {"multi_match": {"query": term, "fields": list(_UNBOOSTED_FIELDS), "type": "phrase"}} for term in excluded
        ]
    return {
        "size": top_k,
        "query": {"bool": boolean},
        "sort": [{"_score": {"order": "desc"}}, {"chunk_id": {"order": "asc"}}],
        "track_total_hits": False,
        "_source": list(SOURCE_FIELDS),
    }


def within_clause_budget(text: str, max_tokens: int = MAX_QUERY_TOKENS) -> str:
    """`text` cut to `max_tokens` terms, the most frequent kept: each piece once, then the repeats, round by round.

    A piece is a word, or one character of Chinese, Japanese or Korean, each costing the terms the standard
    tokenizer makes of it. A passage's query (`weigh_repeats`) repeats the words it says often: the rounds
    keep those ahead, as its weighing does, without one of them taking the whole budget. Ties: first seen.
    """
    pieces = _PIECE.findall(text)
    costs = {piece: max(1, len(_TERM.findall(piece))) for piece in pieces}
    if sum(costs[piece] for piece in pieces) <= max_tokens:
        return text
    counts = Counter(pieces)
    distinct = sorted(counts, key=lambda piece: -counts[piece])  # stable: ties in order of first appearance
    kept: list[str] = []
    budget = max_tokens
    for round_number in range(1, counts[distinct[0]] + 1):
        for piece in distinct:
            if counts[piece] < round_number:
                break
            if costs[piece] <= budget:
                kept.append(piece)
                budget -= costs[piece]
    return " ".join(kept)


def chunk_document(chunk: Chunk, *, indexed_at: datetime, outbox_version: int | None = None) -> dict[str, Any]:
    """The `_source` stored for a chunk, with its `lexical_text` as `titled_content` and `context`.

    `outbox_version`, when given, is stored as `VERSION_FIELD` for version-bounded deletes.
    """
    text = lexical_text(chunk)
    source = {
        **chunk_to_record(chunk, text_key=TEXT_FIELD),
        "titled_content": text.content,
        "context": text.context,
        "indexed_at": indexed_at.isoformat(),
    }
    if outbox_version is not None:
        source[VERSION_FIELD] = outbox_version
    return source


def latest_per_document(documents: Sequence[DocumentChunks]) -> list[DocumentChunks]:
    """One entry per (project, document): the highest outbox version, else the last one listed.

    Entries without a version compare as newest-listed-wins, as before versioning.
    """
    latest: dict[tuple[str, str], DocumentChunks] = {}
    for document in documents:
        key = (document.project_id, document.document_id)
        kept = latest.get(key)
        if (
            kept is not None
            and kept.outbox_version is not None
            and document.outbox_version is not None
            and kept.outbox_version > document.outbox_version
        ):
            continue
        latest[key] = document
    return list(latest.values())


def build_bulk_actions(
    documents: Sequence[DocumentChunks], *, index_of: Callable[[str], str], indexed_at: datetime
) -> list[dict[str, Any]]:
    """`async_bulk` index actions for every chunk of every document, in order; deletes are separate.

    Each chunk goes to its project's index (`index_of(project_id)`), so one request may write several.

    A document with an `outbox_version` is written with external versioning on it (`VERSION_TYPE`).
    """
    actions: list[dict[str, Any]] = []
    for document in documents:
        version = document.outbox_version
        versioning = {} if version is None else {"version": version, "version_type": VERSION_TYPE}
        actions.extend(
            {
                "_op_type": "index",
                "_index": index_of(chunk.project_id),
                "_id": document_key(chunk.project_id, chunk.chunk_id),
                "_source": chunk_document(chunk, indexed_at=indexed_at, outbox_version=version),
                **versioning,
            }
            for chunk in document.chunks
        )
    return actions


def build_stale_chunks_query(
    documents: Sequence[DocumentChunks], *, superseded: frozenset[tuple[str, str]] = frozenset()
) -> dict[str, Any]:
    """A `delete_by_query` body matching every indexed chunk of these documents that is not listed now.

    A document with no chunks matches all of its chunks, which deletes it. With an `outbox_version`
    V, only chunks written before V (or unversioned) match, so a stale writer removes nothing newer.
    A document in `superseded` ((project_id, document_id) whose write met a newer version) matches
    every chunk at V or older, listed or not: the stale writer takes back what it just wrote.
    """
    per_document: list[dict[str, Any]] = []
    for document in documents:
        filters: list[dict[str, Any]] = [
            {"term": {"project_id": document.project_id}},
            {"term": {"document_id": document.document_id}},
        ]
        clause: dict[str, Any] = {"filter": filters}
        is_superseded = (document.project_id, document.document_id) in superseded
        if document.outbox_version is not None:
            filters.append(_older_than(document.outbox_version, inclusive=is_superseded))
        if document.chunks and not is_superseded:
            clause["must_not"] = [{"terms": {"chunk_id": sorted({chunk.chunk_id for chunk in document.chunks})}}]
        per_document.append({"bool": clause})
    return {"query": {"bool": {"should": per_document, "minimum_should_match": 1}}}


def _older_than(version: int, *, inclusive: bool) -> dict[str, Any]:
    """Chunks written before `version` (at it too when `inclusive`), or written unversioned."""
    bound = {"lte" if inclusive else "lt": version}
    unversioned = {"bool": {"must_not": [{"exists": {"field": VERSION_FIELD}}]}}
    return {"bool": {"should": [{"range": {VERSION_FIELD: bound}}, unversioned], "minimum_should_match": 1}}
