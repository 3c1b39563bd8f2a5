"""The open per-project tantivy indexes of one root, and their writers: both bounded, least recently used go.

An open index costs file handles and memory maps; an open writer a lockfile, a memory arena (up to its
heap budget) and a few threads. With thousands of projects neither can stay open for all, so at most
`max_open_indexes` indexes and `max_open_writers` writers are kept. A project's index that is closed is
opened again on its next use (a few milliseconds). A writer being used is never closed under it: writers
are only taken, used and closed by the adapter's one write at a time.

Not thread-safe: the adapter holds its state lock around every call.
"""

from __future__ import annotations

import contextlib
import logging
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import tantivy

from app.domain.errors import EngineUnavailableError
from app.engines.tantivy_folders import INDEX_META_FILE, folder_identity, project_folder, still_attached
from app.engines.tantivy_repair import ProjectRepairs, is_damage
from app.engines.tantivy_schema import ANALYZER_NAME

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

logger = logging.getLogger(__name__)

ENGINE_NAME: Final = "tantivy"
DEFAULT_MAX_OPEN_INDEXES: Final = 256
DEFAULT_MAX_OPEN_WRITERS: Final = 4


@dataclass(slots=True)
class ProjectIndex:
    """One project's open index, the identity of its folder, and its writer while one is held."""

    index: tantivy.Index
    identity: tuple[int, int]
    writer: tantivy.IndexWriter | None = None


class ProjectIndexes:
    """Per-project indexes under one root, opened on first use and closed least recently used first."""

    def __init__(  # noqa: PLR0913 - keyword-only knobs of one cache
        self,
        root: Path,
        *,
        schema: tantivy.Schema,
        analyzer: tantivy.TextAnalyzer,
        writer_heap_bytes: int,
        max_open_indexes: int = DEFAULT_MAX_OPEN_INDEXES,
        max_open_writers: int = DEFAULT_MAX_OPEN_WRITERS,
        repairs: ProjectRepairs | None = None,
    ) -> None:
        self._root = root
        self.repairs = repairs or ProjectRepairs(None)
        self._schema = schema
        self._analyzer = analyzer
        self._writer_heap_bytes = writer_heap_bytes
        self._max_open_indexes = max_open_indexes
        self._max_open_writers = max_open_writers
        self._open: OrderedDict[str, ProjectIndex] = OrderedDict()

    def __len__(self) -> int:
        """How many project indexes are open now."""
        return len(self._open)

    def get(self, project_id: str, *, create: bool) -> ProjectIndex | None:
        """The project's open index; None when it has no folder and not `create` (the project has no chunks).

        Blocking (`stat` calls, maybe an open): call it from a worker thread.

        Raises:
            EngineUnavailableError: the project's open folder was removed or replaced by something other
                than `delete_project` (its documents may be missing), or it cannot be opened.
        """
        if not create and project_id in self.repairs.awaiting_write:
            # Even when open: the refill's write may have made the folder and not committed yet.
            message = f"the lexical index of project {project_id!r} is being refilled from PostgreSQL"
            raise EngineUnavailableError(message, engine=ENGINE_NAME)
        folder = project_folder(self._root, project_id)
        opened = self._open.get(project_id)
        if opened is not None:
            if still_attached(folder, opened.identity, INDEX_META_FILE):
                self._open.move_to_end(project_id)
                return opened
            del self._open[project_id]  # drops its writer too: the outbox still holds what it had not committed
            self.repairs.mark_lost(project_id)
            logger.error("the lexical index folder %s is gone or was replaced under the process", folder)
            message = f"the lexical index folder {folder} is gone or was replaced; refilling project {project_id!r}"
            raise EngineUnavailableError(message, engine=ENGINE_NAME)
        if not create and not (folder / INDEX_META_FILE).is_file():
            return None
        try:
            folder.mkdir(exist_ok=True)
            index = tantivy.Index(self._schema, path=str(folder), reuse=True)
            index.register_tokenizer(ANALYZER_NAME, self._analyzer)
            opened = ProjectIndex(index=index, identity=folder_identity(folder))
        except (OSError, ValueError, RuntimeError) as error:
            if is_damage(error):
                self.repairs.mark_damaged(project_id)
            message = f"cannot open the lexical index in {folder}: {error}"
            raise EngineUnavailableError(message, engine=ENGINE_NAME) from error
        self._open[project_id] = opened
        self._close_idle_indexes()
        return opened

    def take_writer(
        self, project_id: str, opened: ProjectIndex
    ) -> tuple[tantivy.IndexWriter, list[tantivy.IndexWriter]]:
        """The project's writer (taken now if needed), and the writers of others to close to stay in bounds.

        The caller closes the returned writers (`wait_merging_threads`) outside its lock.

        Raises:
            EngineUnavailableError: the writer is held elsewhere (tantivy's lockfile) or cannot be taken.
        """
        if opened.writer is None:
            try:
                opened.writer = opened.index.writer(heap_size=self._writer_heap_bytes, num_threads=1)
            except ValueError as error:
                if is_damage(error):
                    self.repairs.mark_damaged(project_id)
                folder = project_folder(self._root, project_id)
                message = f"cannot take the lexical index writer in {folder}: {error}"
                raise EngineUnavailableError(message, engine=ENGINE_NAME) from error
        surplus = [other for key, other in self._open.items() if other.writer is not None and key != project_id]
        to_close = []
        for other in surplus[: max(0, len(surplus) + 1 - self._max_open_writers)]:
            if other.writer is not None:
                to_close.append(other.writer)
                other.writer = None
        self._close_idle_indexes()
        return opened.writer, to_close

    def forget(self, project_id: str, *, discarded: bool = False) -> tantivy.IndexWriter | None:
        """Close the project's index (before its folder is removed); its writer is returned for the caller to close."""
        opened = self._open.pop(project_id, None)
        self.repairs.forget(project_id, discarded=discarded)
        return None if opened is None else opened.writer

    def forget_all(self) -> list[tantivy.IndexWriter]:
        """Close every index (the root is gone, or the adapter closes); their writers are returned to close."""
        writers = [opened.writer for opened in self._open.values() if opened.writer is not None]
        self._open.clear()
        return writers

    def _close_idle_indexes(self) -> None:
        """Close least recently used indexes past the bound; one holding a writer stays until its writer goes."""
        excess = len(self._open) - self._max_open_indexes
        if excess <= 0:
            return
        idle = [key for key, opened in self._open.items() if opened.writer is None][:excess]
        for key in idle:
            del self._open[key]


def abandon_batch(opened: ProjectIndex, writer: tantivy.IndexWriter) -> None:
    """Drop the uncommitted operations; if even that fails, drop the writer so the next write reopens it."""
    try:
        writer.rollback()
    except (ValueError, RuntimeError, OSError):
        opened.writer = None


def close_writers(writers: Sequence[tantivy.IndexWriter]) -> None:
    """Finish merges and free each writer's lockfile. A failure is ignored: the lock goes with the writer object."""
    for writer in writers:
        with contextlib.suppress(ValueError, RuntimeError, OSError):
            writer.wait_merging_threads()
