"""The embedded BM25 lexical index: tantivy in process, one index per project under one root folder.

Scores are tantivy's BM25 (k1=1.2, b=0.75), on OpenSearch's default scale. Each project has an index of its
own (`app.engines.tantivy_folders`), so its BM25 statistics (document count, average field lengths, document
frequencies) are its own, and a search names one project (`Filters.project_id`). What is filed is defined in
`app.engines.tantivy_schema`, how a query is built in `app.engines.tantivy_query`, which project indexes stay
open in `app.engines.tantivy_projects`; this module owns the root folder, the writes and the worker threads.

The root records the version of what the adapter files in it (`SCHEMA_VERSION_FILE`). A root of an older
version is emptied and recreated at open, with a warning, and the service re-queues every project from
PostgreSQL (`app.engines.tantivy_folders`); a root from a newer version, or holding some other tantivy index,
is refused and never touched.

One process owns a project's writer (tantivy's lockfile refuses a second one, in any process); it is opened
on the project's first write and kept while few projects are written (`max_open_writers`). A refused or
failed write raises `EngineUnavailableError` and the next write tries again, so a writer freed later (a CLI
command beside the server) is picked up without a restart. One server a folder (`app.cli.serve_lock`).

The root can go away under a running service (a volume detached or failed, the folder moved): every search,
write and ping first checks that the root is still the one opened (`app.engines.tantivy_root`), and a search
or write that of its project's folder too (two `stat` calls each). While it is not, every call raises
`EngineUnavailableError` (searches degrade to the semantic leg, `/readyz` answers 200 `degraded`, the outbox
keeps writes pending) until a root of this schema is back at the path. A project that holds no document
loses its folder (`app.engines.project_pruning`); one whose folder is lost or damaged, under the process or
while none ran (`refill_missing_projects` at start), is refilled from PostgreSQL (`app.engines.tantivy_repair`).
"""

from __future__ import annotations

import asyncio
import threading
from collections import defaultdict
from typing import TYPE_CHECKING

from app.domain.errors import EngineUnavailableError
from app.engines.lexical_context import DEFAULT_CONTEXT_MAX_CHARS
from app.engines.project_pruning import PruneSchedule, emptying_projects
from app.engines.tantivy_errors import raise_unavailable, reraise_unless_panic
from app.engines.tantivy_folders import folder_identity, prepare_root, project_folder_ids, remove_project_folder
from app.engines.tantivy_projects import (
    DEFAULT_MAX_OPEN_INDEXES,
    DEFAULT_MAX_OPEN_WRITERS,
    ENGINE_NAME,
    ProjectIndexes,
    abandon_batch,
    close_writers,
)
from app.engines.tantivy_query import FieldBoosts, TantivyQueryBuilder, top_hits
from app.engines.tantivy_repair import ProjectRepairs, is_damage
from app.engines.tantivy_root import RootAttachment
from app.engines.tantivy_schema import DOCUMENT_KEY, build_english_analyzer, build_schema, chunk_document, document_key
from app.engines.thread_completion import finish_in_thread

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence
    from pathlib import Path

    import tantivy

    from app.domain.models import DocumentChunks, Filters, LexicalQuery, ScoredHit
    from app.engines.project_pruning import HoldsDocuments, ProjectsWithDocuments

DEFAULT_WRITER_HEAP_BYTES = 50_000_000  # tantivy needs >= 15 MB per indexing thread


class TantivyLexicalIndex:
    """`LexicalIndex` on tantivy indexes, one per project, under a root (`POIMEN_DATA_DIR/lexical`).

    Searches and writes (fsync on commit) run in threads, writes one at a time; after `close()` every call fails.
    """

    name = ENGINE_NAME

    def __init__(  # noqa: PLR0913 - each bound is a separate knob of the same adapter
        self,
        path: Path,
        *,
        boosts: FieldBoosts | None = None,
        writer_heap_bytes: int = DEFAULT_WRITER_HEAP_BYTES,
        context_max_chars: int = DEFAULT_CONTEXT_MAX_CHARS,
        max_open_indexes: int = DEFAULT_MAX_OPEN_INDEXES,
        max_open_writers: int = DEFAULT_MAX_OPEN_WRITERS,
        holds_documents: HoldsDocuments | None = None,
        projects_with_documents: ProjectsWithDocuments | None = None,
        refill: Callable[[str], Awaitable[int]] | None = None,
    ) -> None:
        """Open the root in `path`, creating the folder when missing.

        `refill(project_id)` queues a project's documents again (`app.engines.tantivy_repair`); without it a
        project lost or damaged under the process fails its searches until its next write.

        Raises:
            EngineUnavailableError: the folder cannot be used (unreadable, or built with another schema).
        """
        self._path = path
        self._context_max_chars = context_max_chars
        analyzer = build_english_analyzer()
        schema = build_schema()
        self._queries = TantivyQueryBuilder(schema, analyzer, boosts or FieldBoosts())
        self._projects = ProjectIndexes(
            path,
            schema=schema,
            analyzer=analyzer,
            writer_heap_bytes=writer_heap_bytes,
            max_open_indexes=max_open_indexes,
            max_open_writers=max_open_writers,
            repairs=ProjectRepairs(refill),
        )
        self._write_lock = asyncio.Lock()
        self._holds_documents, self._projects_with_documents = holds_documents, projects_with_documents
        self._prune_schedule = PruneSchedule()
        # Guards the open project indexes and the root's identity: worker threads notice a lost root.
        self._state_lock = threading.Lock()
        self._closed = False
        try:
            self._recreated = prepare_root(path)
            self._root = RootAttachment(path, identity=folder_identity(path))
        except (OSError, ValueError) as error:
            raise_unavailable(f"cannot open the lexical index in {path}", error)

    @property
    def path(self) -> Path:
        """The root folder holding the project indexes."""
        return self._path

    @property
    def recreated(self) -> bool:
        """True when the folder was emptied (an older schema), now or at an open whose refill was never queued."""
        return self._recreated

    @property
    def open_project_indexes(self) -> int:
        """How many project indexes are open now (bounded by `max_open_indexes`, plus those writing)."""
        with self._state_lock:
            return len(self._projects)

    async def search(self, query: LexicalQuery, *, top_k: int, filters: Filters) -> list[ScoredHit]:
        """Return at most `top_k` chunks of `filters.project_id` matching `query`, best BM25 first.

        Scores use the project's own statistics. It runs in a thread: tantivy releases the GIL, so it overlaps
        the query embedding, and a caller's deadline can abandon a slow search instead of waiting for it.
        """
        self._check_open()
        if top_k <= 0:
            return []
        try:
            return await asyncio.to_thread(self._search_blocking, query, top_k, filters)
        except EngineUnavailableError:
            await self._repair()
            raise

    def _search_blocking(self, query: LexicalQuery, top_k: int, filters: Filters) -> list[ScoredHit]:
        with self._state_lock:
            self._attach_root()
            opened = self._projects.get(filters.project_id, create=False)
        if opened is None:
            return []
        try:
            tantivy_query = self._queries.build(query, filters)
            if tantivy_query is None:
                return []
            hits = top_hits(opened.index.searcher(), tantivy_query, top_k=top_k, filters=filters)
        except (ValueError, RuntimeError, OSError) as error:
            self._note_damage(filters.project_id, error)
            raise_unavailable("lexical search failed", error)
        except BaseException as error:  # noqa: BLE001 - pyo3's PanicException is a BaseException with no importable name
            reraise_unless_panic(error)
            raise_unavailable("lexical search failed", error)
        hits.sort(key=lambda hit: (-hit.score, hit.chunk_id))
        return hits

    async def replace_documents(self, documents: Sequence[DocumentChunks]) -> None:
        """Replace each document's chunks with its current set: one commit per project, then readers refresh.

        A batch spanning projects commits project by project; if one fails, the projects before it stay
        written and the whole batch is retried (replacing a document is idempotent). A project whose last
        documents the batch deleted loses its folder; the idle call (no documents) prunes any other.
        """
        if not documents:
            self._check_open()
            await asyncio.to_thread(self._check_root_blocking)
            await self._repair()
            if self._prune_schedule.due():
                await self.prune_emptied_projects()
            return
        by_project: defaultdict[str, list[DocumentChunks]] = defaultdict(list)
        for document in documents:
            by_project[document.project_id].append(document)  # batch order kept: the last entry of a document wins
        for project_id, project_documents in by_project.items():

            def write(writer: tantivy.IndexWriter, batch: list[DocumentChunks] = project_documents) -> None:
                for document in batch:
                    writer.delete_documents_by_term(
                        DOCUMENT_KEY, document_key(document.project_id, document.document_id)
                    )
                    for chunk in document.chunks:
                        writer.add_document(chunk_document(chunk, context_max_chars=self._context_max_chars))

            await self._write(project_id, write, "replacing documents in the lexical index failed")
        for project_id in emptying_projects(documents):
            await self._prune_if_emptied(project_id)

    async def prune_emptied_projects(self) -> list[str]:
        """Delete the folder of every project that holds no document in PostgreSQL; the projects pruned, sorted."""
        if self._projects_with_documents is None:
            return []
        listed = await asyncio.to_thread(project_folder_ids, self._path)
        emptied = sorted(set(listed) - set(await self._projects_with_documents()))
        return [project_id for project_id in emptied if await self._prune_if_emptied(project_id)]

    async def refill_missing_projects(self) -> list[str]:
        """Queue again from PostgreSQL each project holding documents that has no folder; those projects, sorted."""
        held = await self._projects_with_documents() if self._projects_with_documents is not None else ()
        listed = await asyncio.to_thread(project_folder_ids, self._path)
        with self._state_lock:  # marked first: their searches degrade from now until the refill's write commits
            missing = self._projects.repairs.mark_missing(with_documents=held, with_folders=listed)
        await self._repair()
        return missing

    async def _prune_if_emptied(self, project_id: str) -> bool:
        """Delete the project's folder if PostgreSQL holds no document of it, asked under the write lock.

        A document committed after the question is still in the outbox: its write, which waits for the
        lock, makes the folder anew.
        """
        if self._holds_documents is None:
            return False
        async with self._write_lock:
            self._check_open()
            if await self._holds_documents(project_id):
                return False
            await finish_in_thread(asyncio.to_thread(self._delete_project_blocking, project_id))
        return True

    async def delete_project(self, project_id: str) -> None:
        """Remove the project's index: its writer is closed and its folder deleted."""
        async with self._write_lock:
            self._check_open()
            await finish_in_thread(asyncio.to_thread(self._delete_project_blocking, project_id))

    def _delete_project_blocking(self, project_id: str, *, discarded: bool = False) -> None:
        with self._state_lock:
            self._attach_root()
            writer = self._projects.forget(project_id, discarded=discarded)
        close_writers([writer] if writer is not None else [])
        try:
            remove_project_folder(self._path, project_id)
        except OSError as error:
            raise_unavailable(f"deleting project {project_id!r} from the lexical index failed", error)

    async def ping(self) -> None:
        """Return when the root folder is the one opened and usable; raise `EngineUnavailableError` otherwise."""
        self._check_open()
        await asyncio.to_thread(self._check_root_blocking)

    def _check_root_blocking(self) -> None:
        with self._state_lock:
            self._attach_root()

    async def close(self) -> None:
        """Wait for the running write, release every writer lock and make every later call fail."""
        async with self._write_lock:
            with self._state_lock:
                self._closed = True
                writers = self._projects.forget_all()
            await asyncio.to_thread(close_writers, writers)

    # --- writing -------------------------------------------------------------------------------

    async def _write(self, project_id: str, operations: Callable[[tantivy.IndexWriter], None], failure: str) -> None:
        try:
            async with self._write_lock:
                self._check_open()
                await finish_in_thread(asyncio.to_thread(self._write_blocking, project_id, operations, failure))
        except EngineUnavailableError:
            await self._repair()  # a damaged project discarded now: the outbox's retry writes it anew
            raise

    def _note_damage(self, project_id: str, error: BaseException) -> None:
        if is_damage(error):
            with self._state_lock:
                self._projects.repairs.mark_damaged(project_id)

    async def _repair(self) -> None:
        async def discard(project_id: str) -> None:
            async with self._write_lock:
                await finish_in_thread(asyncio.to_thread(self._delete_project_blocking, project_id, discarded=True))

        await self._projects.repairs.run(discard=discard, state_lock=self._state_lock)

    def _write_blocking(self, project_id: str, operations: Callable[[tantivy.IndexWriter], None], failure: str) -> None:
        with self._state_lock:
            self._attach_root()
            opened = self._projects.get(project_id, create=True)
            if opened is None:  # `create=True` always opens one; kept for the type checker
                raise_unavailable(failure, RuntimeError("no project index"))
            writer, surplus = self._projects.take_writer(project_id, opened)
        close_writers(surplus)
        try:
            operations(writer)
            writer.commit()
        except (ValueError, RuntimeError, OSError) as error:
            abandon_batch(opened, writer)
            self._note_damage(project_id, error)
            raise_unavailable(failure, error)
        except BaseException as error:  # noqa: BLE001 - see `search`
            reraise_unless_panic(error)
            abandon_batch(opened, writer)
            raise_unavailable(failure, error)
        try:
            opened.index.reload()
        except (ValueError, RuntimeError, OSError) as error:
            raise_unavailable("the lexical index committed but readers did not refresh", error)
        with self._state_lock:
            self._projects.repairs.awaiting_write.discard(project_id)  # committed and read: searches may use it

    def _check_open(self) -> None:
        if self._closed:
            message = "the lexical index is closed"
            raise EngineUnavailableError(message, engine=ENGINE_NAME)

    # --- the root folder -----------------------------------------------------------------------

    def _attach_root(self) -> None:
        """Return while the root is the one opened; else drop every project index and reopen what is at the path.

        Blocking (`stat` calls): runs in a worker thread with the state lock held, so a hung volume holds no
        event loop.

        Raises:
            EngineUnavailableError: closed, or no usable root at the path (yet).
        """
        self._check_open()
        # Dropping the writers frees their lockfiles; uncommitted operations go, the outbox still holds them.
        self._root.attach(on_lost=self._projects.forget_all)
