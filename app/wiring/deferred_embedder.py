"""The configured embedding model, loaded only when something first asks for a vector.

`poimen import`, `poimen export` and `poimen reindex` move vectors that exist and index text lexically:
none of them embeds. Loading the model at start cost them ~0.5 GiB of memory with the ONNX backend, and
~1 GiB on a data folder's first start (the ONNX export loads torch), for nothing.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from app.config import ConfigurationError
from app.engines.embedder import canonical_model_name, load_embedder

if TYPE_CHECKING:
    from collections.abc import Sequence

    from app.config import Settings
    from app.engines.embedder import EmbedderOptions, ServingEmbedder


class DeferredEmbedder:
    """An `Embedder` with the configured name and dimensions that loads its model at the first embedding.

    `model_name` and `dimensions` are what `EMBEDDING_MODEL` and `EMBEDDING_DIMENSIONS` say, as
    `configured_model` gives them; the first embedding checks the loaded model's dimensions against them
    (`ConfigurationError` when they differ), as `open_engines` does for a model loaded at start.
    """

    name = "embedder"

    def __init__(self, settings: Settings, *, options: EmbedderOptions) -> None:
        self.model_name = canonical_model_name(settings.embedding_model)
        self.dimensions = settings.embedding_dimensions
        self._configured_name = settings.embedding_model
        self._options = options
        self._loaded: ServingEmbedder | None = None
        self._loading = asyncio.Lock()

    @property
    def loaded(self) -> bool:
        """Whether something has embedded, so the model is in memory."""
        return self._loaded is not None

    async def _model(self) -> ServingEmbedder:
        async with self._loading:
            if self._loaded is None:
                model = await asyncio.to_thread(load_embedder, self._configured_name, options=self._options)
                if model.dimensions != self.dimensions:
                    model.close()
                    msg = (
                        f"EMBEDDING_DIMENSIONS={self.dimensions} but {self._configured_name} embeds in "
                        f"{model.dimensions} dimensions: set EMBEDDING_DIMENSIONS={model.dimensions}"
                    )
                    raise ConfigurationError(msg)
                self._loaded = model
            return self._loaded

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """As the loaded model embeds them (loading it first)."""
        return await (await self._model()).embed_documents(texts)

    async def embed_query(self, text: str, *, scope: str = "") -> list[float]:
        """As the loaded model embeds it (loading it first)."""
        return await (await self._model()).embed_query(text, scope=scope)

    async def embed_queries(self, texts: Sequence[str], *, scope: str = "") -> list[list[float]]:
        """As the loaded model embeds them (loading it first)."""
        return await (await self._model()).embed_queries(texts, scope=scope)

    def close(self) -> None:
        """Stop the loaded model's threads; nothing to do when none was loaded."""
        if self._loaded is not None:
            self._loaded.close()
