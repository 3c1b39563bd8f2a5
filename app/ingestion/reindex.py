"""Rebuilding the lexical index from PostgreSQL, the source of truth: one project, or every project."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.domain.ports import DocumentStore


async def rebuild_project(store: DocumentStore, project_id: str) -> int:
    """Queue every document of the project for lexical indexing again; return how many were queued.

    Nothing is cleared first: the outbox rewrites each document's entries in place, so searches keep
    finding the project the whole time (clearing first left its lexical leg empty until the outbox
    caught up, and nothing said so). Entries of documents PostgreSQL no longer holds never reach a
    result: the searcher drops lexical hits the store does not hold (read-your-deletes).
    """
    return await store.queue_project_for_reindex(project_id)


async def queue_every_project(store: DocumentStore) -> int:
    """Queue every document of every project for lexical indexing (after the index was recreated empty).

    Returns the number of projects queued.
    """
    projects = await store.project_ids()
    for project_id in projects:
        await store.queue_project_for_reindex(project_id)
    return len(projects)
