"""What a project holds, seen from above: document summaries, selections of documents, project stats.

Values of the memory-management use cases (listing, stats, delete by filter); frozen, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from datetime import datetime


@dataclass(frozen=True, slots=True)
class DocumentSelection:
    """Which documents of one project a listing or a delete applies to; every given condition must hold.

    `source_prefix`: the document's source starts with it. `tag`: the document carries it, case aside
    (`app.domain.tags`). Event time: `event_time_from` inclusive, `event_time_to` exclusive (an undated
    document never matches a range). `updated_since`: written at or after it. Nothing given: every
    document of the project.
    """

    project_id: str
    source_prefix: str | None = None
    tag: str | None = None
    event_time_from: datetime | None = None
    event_time_to: datetime | None = None
    updated_since: datetime | None = None

    @property
    def is_everything(self) -> bool:
        """True when no condition narrows the selection (the whole project)."""
        return (
            not self.source_prefix
            and self.tag is None
            and self.event_time_from is None
            and self.event_time_to is None
            and self.updated_since is None
        )


@dataclass(frozen=True, slots=True)
class DocumentSummary:
    """One stored document without its chunks: what a listing shows."""

    document_id: str
    source: str
    title: str
    tags: tuple[str, ...]
    event_time: datetime | None
    chunk_count: int
    version: int
    lexically_indexed: bool
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class ProjectStats:
    """A project's size and lexical-indexing state; an unknown project is all zeros.

    `chunks`/`lexically_indexed`: chunks stored / of those, in the lexical index. `pending`: documents
    awaiting lexical indexing (writes and deletes), `oldest_pending_age_s` how long the oldest has waited
    (0 when none). `last_write_at`: the newest document write (None when the project holds none).
    """

    project_id: str
    documents: int
    chunks: int
    lexically_indexed: int
    pending: int
    oldest_pending_age_s: float
    last_write_at: datetime | None
