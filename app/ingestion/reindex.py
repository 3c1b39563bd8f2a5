"""Rebuilding the lexical index from PostgreSQL, the source of truth: one project, or every project."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.domain.ports import DocumentStore, LexicalIndex


async def rebuild_project(store: DocumentStore, lexical: LexicalIndex, project_id: str) -> int:
    """Drop the project's lexical entries and queue every one of its documents; return how many were queued.

    The outbox worker then indexes them again. Raises `EngineError` when the lexical index cannot be
    cleared (nothing is queued then).
    """
    await lexical.delete_project(project_id)
    return await store.queue_project_for_reindex(project_id)


async def queue_every_project(store: DocumentStore) -> int:
    """Queue every document of every project for lexical indexing (after the index was recreated empty).

    Returns the number of projects queued.
    """
    projects = await store.project_ids()
    for project_id in projects:
        await store.queue_project_for_reindex(project_id)
    return len(projects)
