"""The `Reranker` contract: every adapter (the fake, the learned ranker, a cross-encoder) passes these."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from app.domain.models import LEXICAL_LEG, SEMANTIC_LEG, Chunk, FusedHit, RerankQuery

QUERY = RerankQuery(text="how do I rotate the kafka broker certificates", phrases=("kafka broker",))


def candidate(
    chunk_id: str, text: str, *, semantic_rank: int | None, lexical_rank: int | None, score: float
) -> FusedHit:
    ranks = {leg: rank for leg, rank in ((SEMANTIC_LEG, semantic_rank), (LEXICAL_LEG, lexical_rank)) if rank}
    leg_scores = {SEMANTIC_LEG: 0.9 - 0.05 * semantic_rank} if semantic_rank else {}
    if lexical_rank:
        leg_scores[LEXICAL_LEG] = 12.0 - lexical_rank
    chunk = Chunk(
        chunk_id=chunk_id,
        document_id=f"doc-{chunk_id}",
        project_id="p",
        text=text,
        source=f"{chunk_id}.md",
        level="section",
        breadcrumb=("Runbooks", chunk_id),
        section_title=chunk_id,
        position=0,
        event_time=datetime(2026, 3, 1, tzinfo=UTC),
    )
    return FusedHit(chunk=chunk, score=score, ranks=ranks, leg_scores=leg_scores, contributions={SEMANTIC_LEG: score})


def candidates() -> list[FusedHit]:
    return [
        candidate("a", "Deploying the web frontend with helm.", semantic_rank=1, lexical_rank=None, score=0.9),
        candidate("b", "Rotate the Kafka broker certificates yearly.", semantic_rank=2, lexical_rank=1, score=0.8),
        candidate("c", "Kafka consumer lag alerts and dashboards.", semantic_rank=None, lexical_rank=2, score=0.5),
        candidate(
            "d", "Certificates for the kafka broker are rotated by cron.", semantic_rank=3, lexical_rank=3, score=0.4
        ),
        candidate("e", "Lunch menu for the offsite.", semantic_rank=4, lexical_rank=None, score=0.1),
    ]


class RerankerContract:  # not collected by itself (no Test prefix)
    @pytest.fixture
    def reranker(self):
        raise NotImplementedError

    async def test_returns_every_candidate_once_and_nothing_else(self, reranker) -> None:
        given = candidates()

        reranked = await reranker.rerank(QUERY, given)

        assert sorted(hit.chunk_id for hit in reranked) == sorted(hit.chunk_id for hit in given)

    async def test_orders_best_first_by_rerank_score(self, reranker) -> None:
        reranked = await reranker.rerank(QUERY, candidates())

        scores = [hit.rerank_score for hit in reranked]
        assert all(score is not None for score in scores)
        assert scores == sorted(scores, reverse=True)

    async def test_is_deterministic(self, reranker) -> None:
        first = await reranker.rerank(QUERY, candidates())
        second = await reranker.rerank(QUERY, candidates())

        assert [(hit.chunk_id, hit.rerank_score) for hit in first] == [
            (hit.chunk_id, hit.rerank_score) for hit in second
        ]

    async def test_leaves_fusion_evidence_untouched(self, reranker) -> None:
        given = {hit.chunk_id: hit for hit in candidates()}

        reranked = await reranker.rerank(QUERY, list(given.values()))

        assert all(replace(hit, rerank_score=None) == given[hit.chunk_id] for hit in reranked)

    async def test_does_not_change_its_input(self, reranker) -> None:
        given = candidates()
        before = list(given)

        await reranker.rerank(QUERY, given)

        assert given == before

    async def test_no_candidates_give_no_hits(self, reranker) -> None:
        assert await reranker.rerank(QUERY, []) == []
