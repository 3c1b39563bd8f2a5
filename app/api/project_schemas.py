"""Wire shapes of the memory-management endpoints (listing, stats, deletes) and their mapping from domain values."""

from __future__ import annotations

from datetime import datetime

import msgspec

from app.domain.catalog import DocumentSummary, ProjectStats


class DocumentSummaryOut(msgspec.Struct, kw_only=True):
    """One listed document: no text, no chunks (`GET .../documents/{id}` has them)."""

    id: str
    title: str
    source: str
    tags: list[str]
    event_time: datetime | None
    chunks: int
    version: int
    lexically_indexed: bool
    created_at: datetime
    updated_at: datetime


class DocumentListOut(msgspec.Struct, kw_only=True):
    """One page of a project's documents, by id; pass `next_cursor` back for the next (null: last page)."""

    project: str
    items: list[DocumentSummaryOut]
    next_cursor: str | None


class ProjectOut(msgspec.Struct, kw_only=True):
    """A project in the listing (an object, so fields can join it without breaking callers)."""

    project: str


class ProjectListOut(msgspec.Struct, kw_only=True):
    """One page of the projects the caller may read that hold documents, by id; `next_cursor` null at the end."""

    items: list[ProjectOut]
    next_cursor: str | None


class ProjectStatsOut(msgspec.Struct, kw_only=True):
    """A project's size and lexical backlog; an unknown project answers zeros, like an empty one.

    `lexically_indexed`: how many of its `chunks` the lexical index holds; `pending`: documents whose
    writes or deletes still await the lexical index, the oldest waiting `oldest_pending_age_s`.
    """

    project: str
    documents: int
    chunks: int
    lexically_indexed: int
    pending: int
    oldest_pending_age_s: float
    last_write_at: datetime | None


class DeletedOut(msgspec.Struct, kw_only=True):
    """How many documents a delete removed from PostgreSQL (the lexical index follows through the outbox)."""

    project: str
    deleted: int


class ReindexOut(msgspec.Struct, kw_only=True):
    """How many of the project's documents a lexical rebuild queued; 0 for a project without documents."""

    project: str
    queued_documents: int


def summary_out(summary: DocumentSummary) -> DocumentSummaryOut:
    """Wire shape of a listed document."""
    return DocumentSummaryOut(
        id=summary.document_id,
        title=summary.title,
        source=summary.source,
        tags=list(summary.tags),
        event_time=summary.event_time,
        chunks=summary.chunk_count,
        version=summary.version,
        lexically_indexed=summary.lexically_indexed,
        created_at=summary.created_at,
        updated_at=summary.updated_at,
    )


def stats_out(stats: ProjectStats) -> ProjectStatsOut:
    """Wire shape of a project's stats."""
    return ProjectStatsOut(
        project=stats.project_id,
        documents=stats.documents,
        chunks=stats.chunks,
        lexically_indexed=stats.lexically_indexed,
        pending=stats.pending,
        oldest_pending_age_s=round(stats.oldest_pending_age_s, 3),
        last_write_at=stats.last_write_at,
    )
