"""The second stage: a `Reranker` re-scores the fused top-N of a hybrid search; the rest keeps fusion's order.

It runs after fusion and collapsing, on the candidates as they would be without `min_score`, and before the
floor and the cut to the page: the floor then drops the hits below it and never re-orders the rest (shown
fewer candidates, a ranker that normalises over them would order the same hits otherwise). A reranker that
fails or runs past its deadline never fails the search: the fused order stands and the result names
`rerank_unavailable` / `rerank_timeout` in its degraded reasons.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Final

from app.domain.errors import EngineError, EngineTimeoutError
from app.domain.models import RerankQuery, SearchStrategy

if TYPE_CHECKING:
    from collections.abc import Sequence

    from app.domain.models import FusedHit, SearchPlan
    from app.domain.ports import Reranker

logger = logging.getLogger("poimen.rerank")

RERANK_UNAVAILABLE: Final = "rerank_unavailable"
RERANK_TIMEOUT: Final = "rerank_timeout"


def rerank_query(plan: SearchPlan) -> RerankQuery:
    """What the reranker is told of the query: the semantic text, phrases and the date range of the plan."""
    return RerankQuery(
        text=plan.semantic_text,
        phrases=plan.lexical_query.phrases,
        event_time_from=plan.filters.event_time_from,
        event_time_to=plan.filters.event_time_to,
    )


def order_by_scores(candidates: Sequence[FusedHit], scores: Sequence[float]) -> list[FusedHit]:
    """`candidates` with `rerank_score` set from `scores` (same order), best first; ties keep their order.

    Raises `ValueError` when the counts differ or a score is NaN: a reranker must score every candidate.
    """
    if len(scores) != len(candidates):
        msg = f"{len(scores)} scores for {len(candidates)} candidates"
        raise ValueError(msg)
    if any(math.isnan(score) for score in scores):
        msg = "a rerank score is NaN"
        raise ValueError(msg)
    scored = [(-score, position, hit) for position, (hit, score) in enumerate(zip(candidates, scores, strict=True))]
    scored.sort(key=lambda item: (item[0], item[1]))  # position breaks ties: stable, deterministic
    return [replace(hit, rerank_score=-negated) for negated, _, hit in scored]


@dataclass(frozen=True, slots=True)
class RerankOutcome:
    """The hits after the second stage, its milliseconds, and why it was skipped (None when it ran)."""

    hits: list[FusedHit]
    elapsed_ms: float
    reason: str | None = None


class SecondStage:
    """Applies one `Reranker` to the top `top_n` hits of hybrid searches, within `timeout_s`."""

    def __init__(self, reranker: Reranker, *, top_n: int, timeout_s: float) -> None:
        if top_n < 1:
            msg = f"top_n must be >= 1, got {top_n}"
            raise ValueError(msg)
        self._reranker = reranker
        self._top_n = top_n
        self._timeout_s = timeout_s

    @property
    def name(self) -> str:
        """The reranker's adapter name."""
        return self._reranker.name

    @property
    def top_n(self) -> int:
        """How many of the fused hits, from the top, it reorders."""
        return self._top_n

    def applies_to(self, plan: SearchPlan) -> bool:
        """Only the hybrid strategy's fused list: the rankers weigh both legs' evidence."""
        return plan.strategy is SearchStrategy.HYBRID

    async def apply(self, plan: SearchPlan, hits: Sequence[FusedHit]) -> RerankOutcome:
        """Rerank the first `top_n` of `hits`; the rest follow unchanged. Never raises for an engine failure."""
        started = time.perf_counter()
        head, tail = list(hits[: self._top_n]), list(hits[self._top_n :])
        if len(head) < 2:  # noqa: PLR2004 - one candidate has one order
            return RerankOutcome(list(hits), 0.0)
        reason: str | None = None
        try:
            async with asyncio.timeout(self._timeout_s):
                reranked = await self._reranker.rerank(rerank_query(plan), head)
        except (EngineTimeoutError, TimeoutError):
            reason = RERANK_TIMEOUT
        except EngineError:
            reason = RERANK_UNAVAILABLE
        if reason is not None:
            logger.warning("reranker %s skipped: %s", self._reranker.name, reason)
            reranked = head
        elapsed_ms = (time.perf_counter() - started) * 1000
        return RerankOutcome([*reranked, *tail], elapsed_ms, reason)
