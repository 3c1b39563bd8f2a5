"""The embedded BM25 lexical index: tantivy in process, persisted in one folder.

Scores are tantivy's BM25 (k1=1.2, b=0.75), on the same scale as OpenSearch's default similarity.
What is filed is defined in `app.engines.tantivy_schema`, how a query is built in
`app.engines.tantivy_query`; this module owns the folder, the writer and the worker threads.

The folder records the version of what the adapter files in it (`SCHEMA_VERSION_FILE`). A folder
written by an older version (a lower number, or none: versions before the file existed) is emptied
and recreated at open, with a warning: PostgreSQL is the source of truth, and the service re-queues
every project (or `poimen reindex --project <id>` refills one). A folder from a newer version is
refused rather than downgraded, and a folder holding some other tantivy index is never touched.

One process owns the writer (tantivy's lockfile refuses a second one, in any process); it is opened
on the first write and kept. A refused or failed write raises `EngineUnavailableError` and the next
write tries again, so a writer freed later is picked up without a restart.

The folder can go away under a running service (a volume detached or failed, the folder moved): tantivy
would go on answering from the segments it has open and only fail at the next commit. So every search,
write and ping first checks that the folder is still the one opened (same device and inode, `meta.json`
present; two `stat` calls). When it is not, the index and its writer are dropped and every call raises
`EngineUnavailableError` (searches degrade, `/readyz` answers 503, the outbox keeps writes pending)
until a folder holding an index of this schema is back at the path; it is then reopened.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
from typing import TYPE_CHECKING, NoReturn

import tantivy

from app.domain.errors import EngineUnavailableError
from app.domain.models import ScoredHit
from app.engines.lexical_context import DEFAULT_CONTEXT_MAX_CHARS
from app.engines.tantivy_query import FieldBoosts, TantivyQueryBuilder
from app.engines.tantivy_schema import (
    ANALYZER_NAME,
    DOCUMENT_KEY,
    PAYLOAD,
    PROJECT_ID,
    SCHEMA_VERSION,
    SCHEMA_VERSION_FILE,
    build_english_analyzer,
    build_schema,
    chunk_document,
    decode_chunk,
    document_key,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from pathlib import Path

    from app.domain.models import DocumentChunks, Filters, LexicalQuery

logger = logging.getLogger(__name__)

ENGINE_NAME = "tantivy"
DEFAULT_WRITER_HEAP_BYTES = 50_000_000  # tantivy needs >= 15 MB per indexing thread


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
        self._writer_heap_bytes = writer_heap_bytes
        self._context_max_chars = context_max_chars
        self._analyzer = build_english_analyzer()
        self._schema = build_schema()
        self._queries = TantivyQueryBuilder(self._schema, self._analyzer, boosts or FieldBoosts())
        self._write_lock = asyncio.Lock()
        # Guards the swap of index, writer and folder identity: worker threads notice a lost folder.
        self._state_lock = threading.Lock()
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
            self._identity: tuple[int, int] | None = _folder_identity(path)
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
        self._check_open()
        if top_k <= 0:
            return []
        return await asyncio.to_thread(self._search_blocking, query, top_k, filters)

    def _search_blocking(self, query: LexicalQuery, top_k: int, filters: Filters) -> list[ScoredHit]:
        index = self._attached_index()
        try:
            tantivy_query = self._queries.build(query, filters)
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
            self._check_open()
            await asyncio.to_thread(self._attached_index)
            return

        def write(writer: tantivy.IndexWriter) -> None:
            for document in documents:
                writer.delete_documents_by_term(DOCUMENT_KEY, document_key(document.project_id, document.document_id))
                for chunk in document.chunks:
                    writer.add_document(chunk_document(chunk, context_max_chars=self._context_max_chars))

        await self._write(write, "replacing documents in the lexical index failed")

    async def delete_project(self, project_id: str) -> None:
        """Remove every chunk of `project_id` and commit."""

        def write(writer: tantivy.IndexWriter) -> None:
            writer.delete_documents_by_term(PROJECT_ID, project_id)

        await self._write(write, f"deleting project {project_id!r} from the lexical index failed")

    async def ping(self) -> None:
        """Return when the index can be searched; raise `EngineUnavailableError` otherwise."""
        self._check_open()
        await asyncio.to_thread(self._ping_blocking)

    def _ping_blocking(self) -> None:
        index = self._attached_index()
        try:
            index.searcher()
        except (ValueError, RuntimeError, OSError) as error:
            _raise_unavailable("lexical index does not answer", error)

    async def close(self) -> None:
        """Wait for the running write, release the writer lock and make every later call fail."""
        async with self._write_lock:
            with self._state_lock:
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
            self._check_open()
            work = asyncio.ensure_future(asyncio.to_thread(self._write_blocking, operations, failure))
            try:
                await asyncio.shield(work)
            except asyncio.CancelledError:
                # A thread cannot be stopped: keep the lock until it ends, so two batches never share
                # the writer, then let the cancellation through.
                await asyncio.wait({work})
                if not work.cancelled():
                    work.exception()  # retrieved, so asyncio does not log it as never retrieved
                raise

    def _write_blocking(self, operations: Callable[[tantivy.IndexWriter], None], failure: str) -> None:
        index = self._attached_index()
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
        with self._state_lock:
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

    def _check_open(self) -> None:
        if self._closed:
            message = "the lexical index is closed"
            raise EngineUnavailableError(message, engine=ENGINE_NAME)

    # --- the folder under the index ------------------------------------------------------------

    def _attached_index(self) -> tantivy.Index:
        """The open index while its folder is the one opened; else drop it, and reopen what is at the path.

        Blocking (`stat` calls, maybe an open): runs in a worker thread, so a hung volume holds no event loop.

        Raises:
            EngineUnavailableError: closed, or no usable index at the path (yet).
        """
        with self._state_lock:
            self._check_open()
            if self._index is not None:
                if _still_attached(self._path, self._identity):
                    return self._index
                logger.error(
                    "the lexical index folder %s is gone or was replaced: searches and writes wait", self._path
                )
                # Dropping the writer frees its lockfile; uncommitted operations go, the outbox still holds them.
                self._index, self._writer = None, None
            return self._reattach()

    def _reattach(self) -> tantivy.Index:
        """Open the index now at the path (lock held). Only a folder holding an index of this schema is taken.

        An empty folder is not: creating an index in it would hide that every document is missing.
        """
        unavailable = f"the lexical index folder {self._path} is unavailable"
        try:
            identity = _folder_identity(self._path)
            version = _stored_schema_version(self._path)
        except (OSError, ValueError) as error:
            _raise_unavailable(unavailable, error)
        if version != SCHEMA_VERSION:
            message = f"{unavailable}: it holds no index of this schema"
            raise EngineUnavailableError(message, engine=ENGINE_NAME)
        try:
            index = tantivy.Index(self._schema, path=str(self._path), reuse=True)
            index.register_tokenizer(ANALYZER_NAME, self._analyzer)
        except (OSError, ValueError, RuntimeError) as error:
            _raise_unavailable(unavailable, error)
        if identity != self._identity:
            # Another folder than the one opened (a volume restored from a copy): it may miss documents.
            logger.warning(
                "the lexical index in %s is another folder than the one opened; if it may be missing documents, "
                "refill it from PostgreSQL with `poimen reindex --project <id>` for each project",
                self._path,
            )
        logger.warning("the lexical index folder %s is back: reopened", self._path)
        self._index, self._identity = index, identity
        return index


def _folder_identity(path: Path) -> tuple[int, int]:
    """(device, inode) of `path`: what tells the folder opened from another one put at the same path."""
    stat = path.stat()
    return stat.st_dev, stat.st_ino


def _still_attached(path: Path, identity: tuple[int, int] | None) -> bool:
    """Whether `path` is still the folder of `identity` and still holds an index (`meta.json`)."""
    try:
        return _folder_identity(path) == identity and (path / "meta.json").is_file()
    except OSError:
        return False


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
