"""Embedding an ingest call's chunks: vectors cached for the model first, the rest in bounded batches.

Contracts:
- A chunk's vector is looked up by its `chunk_hash` in the chunk's own project only (`cached_embeddings`);
  a text not cached is embedded once per call, whichever of the call's projects holds it.
- Each embedder call holds at most `batch_size` texts and must answer within `timeout_s`, else
  `EngineTimeoutError` (engine "embedder"); a wrong count of vectors raises `IngestionError`.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Final

from app.domain.errors import EngineTimeoutError, IngestionError
from app.ingestion.content_hashes import embedding_text

if TYPE_CHECKING:
    from collections.abc import Sequence

    from app.domain.models import Chunk
    from app.domain.ports import DocumentStore, Embedder

CACHE_LOOKUP_BATCH: Final = 1000
"""Chunk hashes per `cached_embeddings` call, so one query never carries an unbounded list."""


class ChunkEmbeddings:
    """Vectors by chunk hash from the store's embedding cache and, for what it lacks, the embedder."""

    def __init__(self, *, store: DocumentStore, embedder: Embedder, batch_size: int, timeout_s: float) -> None:
        self._store, self._embedder = store, embedder
        self._embed_batch_size = batch_size
        self._embed_timeout_s = timeout_s

    async def _embed_batch(self, texts: list[str]) -> list[list[float]]:
        """Embed one batch within `embed_timeout_s`: a hung embedder fails the ingest (writing nothing)."""
        try:
            async with asyncio.timeout(self._embed_timeout_s):
                return await self._embedder.embed_documents(texts)
        except TimeoutError:
            msg = f"embedding {len(texts)} texts took longer than {self._embed_timeout_s:g} s"
            raise EngineTimeoutError(msg, engine="embedder") from None

    async def embed(self, chunks: Sequence[Chunk]) -> tuple[dict[str, list[float]], dict[tuple[str, str], int]]:
        """Vectors by chunk hash for every chunk, embedding only hashes not cached for this model.

        Also returns, per (project id, document id), how many texts were embedded on its behalf.
        """
        model = self._embedder.model_name
        # Looked up in each chunk's own project only (`cached_embeddings`); within one batch, which the
        # caller wrote whole, a text is embedded once whichever of its projects holds it.
        hashes_by_project: dict[str, dict[str, None]] = {}
        for chunk in chunks:
            hashes_by_project.setdefault(chunk.project_id, {})[chunk.chunk_hash] = None
        vectors: dict[str, list[float]] = {}
        for project_id, project_hashes in hashes_by_project.items():
            unique_hashes = list(project_hashes)
            for start in range(0, len(unique_hashes), CACHE_LOOKUP_BATCH):
                batch = unique_hashes[start : start + CACHE_LOOKUP_BATCH]
                vectors.update(await self._store.cached_embeddings(project_id, batch, model=model))
        missing: dict[str, Chunk] = {}
        for chunk in chunks:
            if chunk.chunk_hash not in vectors and chunk.chunk_hash not in missing:
                missing[chunk.chunk_hash] = chunk
        pending = list(missing.items())
        for start in range(0, len(pending), self._embed_batch_size):
            batch_items = pending[start : start + self._embed_batch_size]
            embedded = await self._embed_batch([embedding_text(chunk) for _, chunk in batch_items])
            if len(embedded) != len(batch_items):
                msg = f"embedder {self._embedder.name} returned {len(embedded)} vectors for {len(batch_items)} texts"
                raise IngestionError(msg)
            for (hash_value, _), vector in zip(batch_items, embedded, strict=True):
                vectors[hash_value] = vector
        embedded_by: dict[tuple[str, str], int] = {}
        for chunk in missing.values():
            key = (chunk.project_id, chunk.document_id)
            embedded_by[key] = embedded_by.get(key, 0) + 1
        return vectors, embedded_by
