"""Builds the second stage `RERANKER` names, or none; a model that cannot load stops start-up."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.config import ConfigurationError
from app.engines.learned_ranker import LearnedRanker, RankerModelError
from app.retrieval.rerank import SecondStage

if TYPE_CHECKING:
    from app.config import Settings
    from app.domain.ports import Reranker


def build_reranker(settings: Settings) -> Reranker | None:
    """The reranker adapter the settings choose; raises `ConfigurationError` when its model cannot load."""
    if settings.reranker == "none":
        return None
    if settings.reranker == "learned":
        try:
            return LearnedRanker.from_file(settings.reranker_model_path)
        except RankerModelError as error:
            msg = f"RERANKER_MODEL_PATH: {error}"
            raise ConfigurationError(msg) from None
    from app.engines.cross_encoder import CrossEncoderReranker  # noqa: PLC0415 - torch's cross-encoder only when chosen

    folder = settings.reranker_model_path
    if folder is None:  # the settings refuse this; kept for a type checker
        msg = "RERANKER=cross-encoder needs RERANKER_MODEL_PATH"
        raise ConfigurationError(msg)
    try:
        return CrossEncoderReranker.from_folder(folder)
    except ValueError as error:
        raise ConfigurationError(str(error)) from None


def build_second_stage(settings: Settings) -> SecondStage | None:
    """The second stage over `build_reranker`, with `RERANK_TOP_N` and `RERANK_TIMEOUT_MS`; None when off."""
    reranker = build_reranker(settings)
    if reranker is None:
        return None
    return SecondStage(reranker, top_n=settings.rerank_top_n, timeout_s=settings.rerank_timeout_ms / 1000)
