"""Project indexes of the embedded lexical engine lost or damaged under the process, and their refill.

A project's folder deleted under a running service left its lexical leg answering nothing, not degraded,
until someone ran `poimen reindex`; a damaged one (a segment file cut short by a torn write or a bad disk)
failed every search and every write for good, `poimen reindex` included, and its entries, retried first,
held back every other project's outbox entries behind them. So the adapter records such projects here:
a damaged folder is discarded, and every lost or discarded project is queued again from PostgreSQL (the
source of truth) through the outbox. Until a write to it commits, its searches fail (the lexical leg
degraded, as it says), never an empty answer that reads as "nothing matches".

`run` takes the adapter's state lock around its uses of the sets; the adapter holds it around every other call.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Final

from app.domain.errors import EngineError

if TYPE_CHECKING:
    import threading
    from collections.abc import Awaitable, Callable, Collection

logger = logging.getLogger(__name__)

DAMAGE_MARKERS: Final = ("Data corrupted", "InvalidData", "FileDoesNotExist")
"""How tantivy names an index it cannot read: a corrupted or cut file (its footer checks), a segment file gone."""


def is_damage(error: BaseException) -> bool:
    """Whether tantivy's error says the index's files are damaged (not the disk full, nor a lock held)."""
    text = str(error)
    return any(marker in text for marker in DAMAGE_MARKERS)


class ProjectRepairs:
    """Which projects are owed a refill, which to discard first, and which wait for their folder to be written."""

    def __init__(self, refill: Callable[[str], Awaitable[int]] | None) -> None:
        self._refill = refill
        self.damaged: set[str] = set()
        """Projects whose folder is to be discarded, then refilled."""
        self.lost: set[str] = set()
        """Projects owed a refill: their folder went away under the process."""
        self.awaiting_write: set[str] = set()
        """Projects whose searches fail until a write to them commits."""

    def mark_lost(self, project_id: str) -> None:
        """The project's folder went away under the process: refill it, and fail its searches until then."""
        self.lost.add(project_id)
        self.awaiting_write.add(project_id)

    def mark_damaged(self, project_id: str) -> None:
        """Tantivy cannot read the project's index: discard its folder, refill it, and fail its searches until then."""
        self.damaged.add(project_id)
        self.awaiting_write.add(project_id)

    def mark_missing(self, *, with_documents: Collection[str], with_folders: Collection[str]) -> list[str]:
        """Mark lost every project holding documents that has no folder (lost while no process ran); them, sorted.

        Without this such a project read at the next start as one without chunks: searches found nothing and
        said nothing (not degraded) until `poimen reindex`. A project whose first write is still queued has no
        folder yet either: its refill only queues its documents again, and its searches wait for the write.
        """
        missing = sorted(set(with_documents) - set(with_folders))
        for project_id in missing:
            logger.warning("the lexical index of project %r has no folder (lost, or not written yet)", project_id)
            self.mark_lost(project_id)
        return missing

    def forget(self, project_id: str, *, discarded: bool = False) -> None:
        """The project's folder was deleted on purpose: the project deleted or emptied, or (`discarded`) damaged."""
        self.damaged.discard(project_id)
        self.lost.discard(project_id)
        if not discarded:
            self.awaiting_write.discard(project_id)

    async def run(self, *, discard: Callable[[str], Awaitable[None]], state_lock: threading.Lock) -> None:
        """Discard the damaged projects' folders, then queue every lost or damaged project again from PostgreSQL.

        A refill that fails stays owed: the adapter's next failure or idle call tries again.
        """
        with state_lock:
            damaged, lost = self.damaged, self.lost
            self.damaged, self.lost = set(), set()
        for project_id in sorted(damaged):
            logger.error("the lexical index of project %r is damaged: discarded, to be refilled", project_id)
            await discard(project_id)  # its searches still fail: it stays in `awaiting_write`
        for project_id in sorted(damaged | lost):
            queued = await self._queue_again(project_id)
            with state_lock:
                if queued is None:
                    self.mark_lost(project_id)
                elif not queued:
                    self.awaiting_write.discard(project_id)  # it holds no document: no write will come

    async def _queue_again(self, project_id: str) -> int | None:
        """How many documents were queued again; None when that failed."""
        if self._refill is None:
            return 1  # an adapter without a store (tests): its searches fail until a write
        try:
            queued = await self._refill(project_id)
        except EngineError as error:
            logger.warning("refilling project %r of the lexical index failed, tried again: %s", project_id, error)
            return None
        logger.warning("lexical index of project %r queued again from PostgreSQL: %d documents", project_id, queued)
        return queued
