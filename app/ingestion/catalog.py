"""The memory-management use case: list a project's documents, read its stats, delete by selection.

Deletes go to the source of truth (PostgreSQL) in one transaction that queues each lexical delete in
the outbox and moves the project's generation on, so every replica's query cache stops serving the
old answers at once; the lexical index follows through the outbox worker, woken here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Callable

    from app.domain.catalog import DocumentSelection, DocumentSummary, ProjectStats
    from app.domain.ports import DocumentStore

MAX_PAGE_SIZE: Final = 1000


@dataclass(frozen=True, slots=True)
class DocumentPage:
    """One page of a listing; `next_after` is the id to continue after (None: this is the last page)."""

    items: tuple[DocumentSummary, ...]
    next_after: str | None


@dataclass(frozen=True, slots=True)
class ProjectPage:
    """One page of the projects a caller may see; `next_after` is the id to continue after (None: last page)."""

    project_ids: tuple[str, ...]
    next_after: str | None


class ProjectCatalog:
    """Lists, counts and deletes a project's documents through the `DocumentStore` port."""

    def __init__(self, *, store: DocumentStore, on_written: Callable[[str], None] | None = None) -> None:
        self._store = store
        self._on_written = on_written

    async def page(self, selection: DocumentSelection, *, after: str | None, limit: int) -> DocumentPage:
        """Up to `limit` (1-`MAX_PAGE_SIZE`) selected documents by id after `after`, and where the next page starts."""
        limit = min(max(limit, 1), MAX_PAGE_SIZE)
        # One more than asked tells whether another page exists without a second query.
        found = await self._store.list_documents(selection, after=after, limit=limit + 1)
        items = tuple(found[:limit])
        return DocumentPage(items=items, next_after=items[-1].document_id if len(found) > limit else None)

    async def projects(self, granted: frozenset[str] | None, *, after: str | None, limit: int) -> ProjectPage:
        """Up to `limit` (1-`MAX_PAGE_SIZE`) projects holding documents, by id after `after`, among `granted`.

        `granted` None means every project (no auth, or a token for `"*"`); otherwise only those it names
        are listed, so a caller never learns of a project it may not read.
        """
        limit = min(max(limit, 1), MAX_PAGE_SIZE)
        # A token's projects are read in their own scope: the store never reads another project's rows for it.
        visible = [
            project_id
            for project_id in await self._store.project_ids(among=granted)
            if after is None or project_id > after
        ]
        page = tuple(visible[:limit])
        return ProjectPage(project_ids=page, next_after=page[-1] if len(visible) > limit else None)

    async def stats(self, project_id: str) -> ProjectStats:
        """The project's counts and lexical backlog (all zeros for an unknown project)."""
        return await self._store.project_stats(project_id)

    async def delete(self, selection: DocumentSelection) -> int:
        """Delete the selected documents (all of the project for an unnarrowed selection); return how many."""
        deleted = await self._store.delete_documents(selection)
        if deleted and self._on_written is not None:
            self._on_written(selection.project_id)
        return deleted
