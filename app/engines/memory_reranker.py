"""`TermOverlapReranker`: the reference fake `Reranker`, pure and instant, for unit tests and the contract suite."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.retrieval.rerank import order_by_scores
from app.retrieval.rerank_features import query_stems

if TYPE_CHECKING:
    from collections.abc import Sequence

    from app.domain.models import FusedHit, RerankQuery


class TermOverlapReranker:
    """Scores a candidate by how many of the query's content words its text holds (crude stems)."""

    name = "term-overlap"

    async def rerank(self, query: RerankQuery, candidates: Sequence[FusedHit]) -> list[FusedHit]:
        """Order by overlap count; equal counts keep the fused order."""
        wanted = query_stems(query.text)
        scores = [float(len(wanted & query_stems(hit.chunk.text))) for hit in candidates]
        return order_by_scores(candidates, scores)
