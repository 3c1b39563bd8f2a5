"""Deleting the lexical index of a project that holds no document: what both lexical adapters share.

PostgreSQL is the source of truth. A project none of whose documents it holds (deleted whole, or its
last document deleted) has nothing to search, so its lexical index (an OpenSearch index with its shard,
a tantivy folder) is dead weight that nothing else would ever remove. An adapter given
`holds_documents` and `projects_with_documents` deletes it: after a batch that only deleted documents
of the project, and on the outbox's idle call every `PRUNE_INTERVAL_S` for any other left behind.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Collection, Sequence

    from app.domain.models import DocumentChunks

    HoldsDocuments = Callable[[str], Awaitable[bool]]
    """Whether PostgreSQL holds at least one document of the project."""
    ProjectsWithDocuments = Callable[[], Awaitable[Collection[str]]]
    """Every project PostgreSQL holds a document of."""

PRUNE_INTERVAL_S: Final = 60.0
"""How often the idle call deletes the indexes of projects that hold no document."""


def emptying_projects(documents: Sequence[DocumentChunks]) -> list[str]:
    """The projects this batch only deletes documents of (none of theirs in it has a chunk), sorted.

    Those are the projects whose last document the batch may have deleted; a project with a chunk in the
    batch keeps its index whatever PostgreSQL says.
    """
    written = {document.project_id for document in documents if document.chunks}
    return sorted({document.project_id for document in documents} - written)


class PruneSchedule:
    """When the idle call prunes: the first time, then at most once every `interval_s` (monotonic clock)."""

    def __init__(self, interval_s: float = PRUNE_INTERVAL_S) -> None:
        self._interval_s = interval_s
        self._last_s = float("-inf")

    def due(self) -> bool:
        """True (and the time noted) when `interval_s` has passed since the last prune."""
        now_s = time.monotonic()
        if now_s - self._last_s < self._interval_s:
            return False
        self._last_s = now_s
        return True
