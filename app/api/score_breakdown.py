"""The explain shape of one hit's score (`score_breakdown`): its ranks, the fusion that ordered it, its relevance."""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from app.domain.models import LEXICAL_LEG, SEMANTIC_LEG

if TYPE_CHECKING:
    from app.domain.models import FusedHit


class RrfComponents(msgspec.Struct, kw_only=True):
    """Each leg's contribution to the fused ranking score (the reference's name, kept for its clients).

    Whatever fusion ran (for RRF: weight / (k + rank)); `fusion` names it and gives the same numbers.
    """

    semantic_contribution: float
    lexical_contribution: float


class FusionBreakdown(msgspec.Struct, kw_only=True):
    """The ranking: the fusion `method` that ordered the hits, its score and each leg's contribution.

    `boosts`: what the score holds besides the legs, by name: `entity` (a turn said by a person the query
    names), `mention` (its text names one), `date` (it carries a date, for a *when* question), `recency`,
    `neighbours` (part of a nearby turn's score); `score` is the legs' contributions plus these. Comparable
    within one response only (a z-score of a lone hit is 0, an RRF sum depends on k).
    """

    method: str
    score: float
    semantic_contribution: float
    lexical_contribution: float
    boosts: dict[str, float] = {}


class RelevanceBreakdown(msgspec.Struct, kw_only=True):
    """What `final_score` is made of: each answering leg's raw similarity on an absolute [0, 1] scale.

    `semantic`: cosine clamped to [0, 1]; `lexical`: BM25 / (BM25 + h), h 55 for a query of 9 words (less for
    fewer, more for more); null for a leg that did not answer. `mean`: their weighted mean, what this hit reads
    on its own: weighted by the request's `weights`, else the knobs' (0.45 / 0.55), equally for `rrf` without
    `weights`, over the legs that answered (one that missed the hit adds 0). `final_score` is the lowest `mean`
    of this hit and every hit fusion ranked above it (one `collapse` left out included), so it never rises down
    the fused list (a `RERANKER` re-orders its top N by `rerank_score`): a hit ranked below one that reads 0 (no
    lexical match, a cosine of 0 or less) reads 0 too, even one the lexical leg found.
    """

    semantic: float | None
    lexical: float | None
    mean: float | None


class ScoreBreakdown(msgspec.Struct, kw_only=True):
    """Where a hit's score came from: 1-based ranks in each leg (null when that leg missed it)."""

    semantic_rank: int | None
    lexical_rank: int | None
    rrf_components: RrfComponents
    fusion: FusionBreakdown
    relevance: RelevanceBreakdown


def score_breakdown_out(hit: FusedHit, *, fusion_method: str) -> ScoreBreakdown:
    """Wire shape of where `hit`'s scores came from, `fusion_method` being the fusion that ordered it."""
    return ScoreBreakdown(
        semantic_rank=hit.ranks.get(SEMANTIC_LEG),
        lexical_rank=hit.ranks.get(LEXICAL_LEG),
        rrf_components=RrfComponents(
            semantic_contribution=hit.contributions.get(SEMANTIC_LEG, 0.0),
            lexical_contribution=hit.contributions.get(LEXICAL_LEG, 0.0),
        ),
        fusion=FusionBreakdown(
            method=fusion_method,
            score=hit.score,
            semantic_contribution=hit.contributions.get(SEMANTIC_LEG, 0.0),
            lexical_contribution=hit.contributions.get(LEXICAL_LEG, 0.0),
            boosts={
                name: value for name, value in hit.contributions.items() if name not in {SEMANTIC_LEG, LEXICAL_LEG}
            },
        ),
        relevance=RelevanceBreakdown(
            semantic=hit.relevance_parts.get(SEMANTIC_LEG),
            lexical=hit.relevance_parts.get(LEXICAL_LEG),
            mean=hit.relevance_mean,
        ),
    )
