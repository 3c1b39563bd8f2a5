"""`InMemoryVectorIndex`: exact cosine search over an `InMemoryDocumentStore`'s chunks, the reference fake.

Passes the vector-index contract suite as `PgVectorIndex` does; `available = False` makes every call raise
`EngineUnavailableError`.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from app.domain.errors import EngineUnavailableError
from app.domain.models import ScoredHit
from app.engines.memory_filters import chunk_matches, cosine_similarity

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence
    from contextlib import AbstractAsyncContextManager

    from app.domain.models import Filters
    from app.domain.ports import VectorRead
    from app.engines.memory import InMemoryDocumentStore


class InMemoryVectorIndex:
    """`VectorIndex` over an `InMemoryDocumentStore`'s chunks: exact cosine, ties by chunk id."""

    name = "memory"

    def __init__(self, store: InMemoryDocumentStore) -> None:
        self.available = True
        self._store = store

    async def search(self, embedding: Sequence[float], *, top_k: int, filters: Filters) -> list[ScoredHit]:
        """Return at most `top_k` chunks matching `filters`, best first; `score` is cosine similarity."""
        await self.ping()
        if top_k <= 0:
            return []
        hits = [
            ScoredHit(chunk=chunk, score=cosine_similarity(embedding, vector))
            for chunk, vector in self._store.embedded_chunks(filters.project_id)
            if chunk_matches(chunk, filters)
        ]
        hits.sort(key=lambda hit: (-hit.score, hit.chunk_id))
        return hits[:top_k]

    def read(self, project_id: str) -> AbstractAsyncContextManager[VectorRead]:
        """`ConfirmingVectorIndex.read`: this index and its store, checked to stay in `project_id`."""
        return self._read(project_id)

    @asynccontextmanager
    async def _read(self, project_id: str) -> AsyncIterator[VectorRead]:
        await self.ping()
        yield _MemoryVectorRead(self, self._store, project_id)

    async def ping(self) -> None:
        """Return, or raise `EngineUnavailableError` when marked unavailable."""
        if not self.available:
            message = "memory vector index marked unavailable"
            raise EngineUnavailableError(message, engine=self.name)


class _MemoryVectorRead:
    """`VectorRead` over the in-memory index and its store (no snapshot to hold: every call reads them now)."""

    began = True  # nothing to take: every call reads the index and its store as they are

    def __init__(self, index: InMemoryVectorIndex, store: InMemoryDocumentStore, project_id: str) -> None:
        self._index = index
        self._store = store
        self._project_id = project_id

    async def search(self, embedding: Sequence[float], *, top_k: int, filters: Filters) -> list[ScoredHit]:
        """`InMemoryVectorIndex.search` within the read's project."""
        self._check_project(filters.project_id)
        return await self._index.search(embedding, top_k=top_k, filters=filters)

    async def existing_chunks(
        self, project_id: str, chunk_ids: Sequence[str], *, filters: Filters | None = None
    ) -> dict[str, str]:
        """Chunk id -> chunk hash for those of `chunk_ids` the project holds (its store's chunks)."""
        self._check_project(project_id)
        return await self._store.existing_chunks(project_id, chunk_ids, filters=filters)

    def _check_project(self, project_id: str) -> None:
        if project_id != self._project_id:
            msg = f"a read of project {self._project_id!r} asked about project {project_id!r}"
            raise ValueError(msg)
