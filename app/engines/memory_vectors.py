"""`InMemoryVectorIndex`: exact cosine search over an `InMemoryDocumentStore`'s chunks, the reference fake.

Passes the vector-index contract suite as `PgVectorIndex` does; `available = False` makes every call raise
`EngineUnavailableError`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.domain.errors import EngineUnavailableError
from app.domain.models import ScoredHit
from app.engines.memory_filters import chunk_matches, cosine_similarity

if TYPE_CHECKING:
    from collections.abc import Sequence

    from app.domain.models import Filters
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

    async def search_confirming(
        self, embedding: Sequence[float], *, top_k: int, filters: Filters, chunk_ids: Sequence[str]
    ) -> tuple[list[ScoredHit], dict[str, str]]:
        """`search`, and chunk id -> chunk hash for those of `chunk_ids` the project holds (its store's chunks)."""
        hits = await self.search(embedding, top_k=top_k, filters=filters)
        return hits, await self._store.existing_chunks(filters.project_id, chunk_ids, filters=filters)

    async def ping(self) -> None:
        """Return, or raise `EngineUnavailableError` when marked unavailable."""
        if not self.available:
            message = "memory vector index marked unavailable"
            raise EngineUnavailableError(message, engine=self.name)
