"""A cross-encoder second stage for users who have one: a sentence-transformers `CrossEncoder` from a local folder.

None ships with the service (no cross-encoder with real weights installs offline here); the hub is never
consulted, so a folder that is not a complete model fails at start, not on a query.
"""

from __future__ import annotations

import asyncio
import os
import threading
from typing import TYPE_CHECKING, Any

from app.domain.errors import EngineUnavailableError
from app.retrieval.rerank import order_by_scores

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from app.domain.models import FusedHit, RerankQuery

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

CROSS_ENCODER_BATCH_SIZE = 32


class CrossEncoderReranker:
    """`Reranker` scoring (query, chunk text) pairs with a cross-encoder; inference runs in a worker thread."""

    name = "cross-encoder"

    def __init__(self, model: Any, *, batch_size: int = CROSS_ENCODER_BATCH_SIZE) -> None:  # noqa: ANN401 - CrossEncoder is untyped
        self._model = model
        self._batch_size = batch_size
        self._lock = threading.Lock()  # torch already uses every core for one batch

    @classmethod
    def from_folder(cls, folder: Path, *, max_length: int = 512) -> CrossEncoderReranker:
        """Load the model saved in `folder` (`CrossEncoder.save`); raises `ValueError` naming what is missing."""
        if not folder.is_dir():
            msg = f"RERANKER_MODEL_PATH={folder}: no such folder (a saved sentence-transformers CrossEncoder)"
            raise ValueError(msg)
        from sentence_transformers import CrossEncoder  # noqa: PLC0415 - torch loads only when this reranker is chosen

        try:
            model = CrossEncoder(str(folder), device="cpu", max_length=max_length, local_files_only=True)
        except (OSError, ValueError) as error:
            msg = f"RERANKER_MODEL_PATH={folder}: not a loadable cross-encoder ({error})"
            raise ValueError(msg) from None
        return cls(model)

    def _scores(self, pairs: list[tuple[str, str]]) -> list[float]:
        with self._lock:
            scores = self._model.predict(pairs, batch_size=self._batch_size, show_progress_bar=False)
        return [float(score) for score in scores]

    async def rerank(self, query: RerankQuery, candidates: Sequence[FusedHit]) -> list[FusedHit]:
        """Score each candidate's titled text against the query text; the model's logit is the score."""
        if not candidates:
            return []
        pairs = [(query.text, _passage(hit)) for hit in candidates]
        try:
            scores = await asyncio.to_thread(self._scores, pairs)
        except (RuntimeError, ValueError) as error:
            msg = f"cross-encoder failed: {error}"
            raise EngineUnavailableError(msg, engine=self.name) from error
        return order_by_scores(candidates, scores)


def _passage(hit: FusedHit) -> str:
    chunk = hit.chunk
    title = " > ".join(chunk.breadcrumb) or chunk.section_title
    return f"{title}\n{chunk.text}" if title else chunk.text
