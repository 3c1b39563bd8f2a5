"""The second stage: ordering helper, `SecondStage` (top-N, degrading), its place in `HybridSearcher`, features."""

from __future__ import annotations

import asyncio
import json
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pytest

from app.config import ConfigurationError, Settings
from app.domain.errors import EngineUnavailableError
from app.domain.labels import STAGE_RERANK
from app.domain.models import LEXICAL_LEG, SEMANTIC_LEG, Filters, FusedHit, RerankQuery, SearchStrategy
from app.engines.learned_ranker import LearnedRanker, LinearRankerModel, RankerModelError
from app.engines.memory_reranker import TermOverlapReranker
from app.retrieval.rerank import RERANK_TIMEOUT, RERANK_UNAVAILABLE, SecondStage, order_by_scores, rerank_query
from app.retrieval.rerank_features import FEATURE_NAMES, candidate_features
from app.retrieval.searcher import HybridSearcher
from app.wiring.rerankers import build_second_stage
from tests.contract.reranker import candidate
from tests.unit.test_searcher import FakeEmbedder, FakeLexicalIndex, FakeVectorIndex, make_plan, semantic_hits


def fused(*chunk_ids: str) -> list[FusedHit]:
    return [
        candidate(cid, f"text {cid}", semantic_rank=rank, lexical_rank=None, score=1.0 / rank)
        for rank, cid in enumerate(chunk_ids, start=1)
    ]


@dataclass
class ReversingReranker:
    """Scores by reversed position: the fused last comes first. Records how many candidates it saw."""

    error: Exception | None = None
    delay_s: float = 0.0
    name: str = "reversing"
    seen: list[int] = field(default_factory=list)

    async def rerank(self, query: RerankQuery, candidates) -> list[FusedHit]:
        self.seen.append(len(candidates))
        await asyncio.sleep(self.delay_s)
        if self.error is not None:
            raise self.error
        return order_by_scores(candidates, [float(position) for position in range(len(candidates))])


def test_order_by_scores_sorts_best_first_and_keeps_ties_in_fused_order() -> None:
    hits = fused("a", "b", "c", "d")

    ordered = order_by_scores(hits, [1.0, 2.0, 1.0, 2.0])

    assert [hit.chunk_id for hit in ordered] == ["b", "d", "a", "c"]
    assert [hit.rerank_score for hit in ordered] == [2.0, 2.0, 1.0, 1.0]


def test_order_by_scores_refuses_a_missing_or_nan_score() -> None:
    with pytest.raises(ValueError, match="2 scores for 3 candidates"):
        order_by_scores(fused("a", "b", "c"), [1.0, 2.0])
    with pytest.raises(ValueError, match="NaN"):
        order_by_scores(fused("a", "b"), [1.0, math.nan])


async def test_second_stage_reranks_only_the_top_n_and_keeps_the_tail() -> None:
    reranker = ReversingReranker()
    stage = SecondStage(reranker, top_n=3, timeout_s=30.0)

    outcome = await stage.apply(make_plan(), fused("a", "b", "c", "d", "e"))

    assert [hit.chunk_id for hit in outcome.hits] == ["c", "b", "a", "d", "e"]
    assert reranker.seen == [3]
    assert outcome.reason is None
    assert outcome.hits[3].rerank_score is None


async def test_a_failing_reranker_keeps_the_fused_order_and_says_why() -> None:
    stage = SecondStage(ReversingReranker(error=EngineUnavailableError("down", engine="x")), top_n=3, timeout_s=30.0)

    outcome = await stage.apply(make_plan(), fused("a", "b", "c"))

    assert [hit.chunk_id for hit in outcome.hits] == ["a", "b", "c"]
    assert outcome.reason == RERANK_UNAVAILABLE


async def test_a_slow_reranker_times_out_and_keeps_the_fused_order() -> None:
    stage = SecondStage(ReversingReranker(delay_s=1.0), top_n=3, timeout_s=0.01)

    outcome = await stage.apply(make_plan(), fused("a", "b", "c"))

    assert [hit.chunk_id for hit in outcome.hits] == ["a", "b", "c"]
    assert outcome.reason == RERANK_TIMEOUT


def test_second_stage_applies_to_hybrid_plans_only() -> None:
    stage = SecondStage(ReversingReranker(), top_n=3, timeout_s=30.0)

    assert stage.applies_to(make_plan(SearchStrategy.HYBRID))
    assert not stage.applies_to(make_plan(SearchStrategy.LEXICAL))
    assert not stage.applies_to(make_plan(SearchStrategy.SEMANTIC))


def test_second_stage_refuses_top_n_below_one() -> None:
    with pytest.raises(ValueError, match="top_n"):
        SecondStage(ReversingReranker(), top_n=0, timeout_s=30.0)


async def test_searcher_reranks_hybrid_results_and_times_the_rerank_stage() -> None:
    vector = FakeVectorIndex(semantic_hits(("a", 0.9), ("b", 0.8), ("c", 0.7)))
    stage = SecondStage(ReversingReranker(), top_n=10, timeout_s=30.0)
    searcher = HybridSearcher(vector=vector, lexical=FakeLexicalIndex(), embedder=FakeEmbedder(), second_stage=stage)

    result = await searcher.search(make_plan())

    assert [hit.chunk_id for hit in result.hits] == ["c", "b", "a"]
    assert STAGE_RERANK in result.stage_ms
    assert not result.degraded


async def test_the_second_stage_sees_its_top_n_even_when_the_page_is_shorter() -> None:
    vector = FakeVectorIndex(semantic_hits(("a", 0.9), ("b", 0.8), ("c", 0.7), ("d", 0.6)))
    reranker = ReversingReranker()
    stage = SecondStage(reranker, top_n=3, timeout_s=30.0)
    searcher = HybridSearcher(vector=vector, lexical=FakeLexicalIndex(), embedder=FakeEmbedder(), second_stage=stage)

    result = await searcher.search(make_plan(limit=2))

    assert reranker.seen == [3]
    assert [hit.chunk_id for hit in result.hits] == ["c", "b"]
    assert all(hit.relevance is not None for hit in result.hits)


async def test_searcher_degrades_but_answers_when_the_reranker_fails() -> None:
    vector = FakeVectorIndex(semantic_hits(("a", 0.9), ("b", 0.8)))
    failing = ReversingReranker(error=EngineUnavailableError("down", engine="x"))
    searcher = HybridSearcher(
        vector=vector,
        lexical=FakeLexicalIndex(),
        embedder=FakeEmbedder(),
        second_stage=SecondStage(failing, top_n=10, timeout_s=30.0),
    )

    result = await searcher.search(make_plan())

    assert [hit.chunk_id for hit in result.hits] == ["a", "b"]
    assert result.degraded_reasons == (RERANK_UNAVAILABLE,)


async def test_searcher_does_not_rerank_a_single_leg_strategy() -> None:
    vector = FakeVectorIndex(semantic_hits(("a", 0.9), ("b", 0.8)))
    reranker = ReversingReranker()
    searcher = HybridSearcher(
        vector=vector,
        lexical=FakeLexicalIndex(),
        embedder=FakeEmbedder(),
        second_stage=SecondStage(reranker, top_n=10, timeout_s=30.0),
    )

    result = await searcher.search(make_plan(SearchStrategy.SEMANTIC))

    assert [hit.chunk_id for hit in result.hits] == ["a", "b"]
    assert STAGE_RERANK not in result.stage_ms
    assert reranker.seen == []


def test_features_follow_the_declared_names_one_row_per_candidate() -> None:
    hits = fused("a", "b")

    rows = candidate_features(RerankQuery(text="text"), hits)

    assert len(rows) == len(hits)
    assert all(len(row) == len(FEATURE_NAMES) for row in rows)


def test_features_see_both_legs_phrases_years_and_the_date_range() -> None:
    hit = candidate("x", "In 2026 the kafka broker moved.", semantic_rank=2, lexical_rank=4, score=1.0)
    query = RerankQuery(
        text="kafka broker 2026",
        phrases=("kafka broker",),
        event_time_from=datetime(2026, 1, 1, tzinfo=UTC),
        event_time_to=datetime(2027, 1, 1, tzinfo=UTC),
    )

    row = dict(zip(FEATURE_NAMES, candidate_features(query, [hit])[0], strict=True))

    assert row["both_found"] == 1.0
    assert row["semantic_reciprocal_rank"] == pytest.approx(1 / 2)
    assert row["lexical_reciprocal_rank"] == pytest.approx(1 / 4)
    assert row["phrase_match"] == 1.0
    assert row["year_match"] == 1.0
    assert row["date_in_range"] == 1.0
    assert row["text_term_overlap"] == 1.0


def test_a_leg_that_missed_the_candidate_gives_zero_evidence() -> None:
    hit = candidate("x", "text", semantic_rank=None, lexical_rank=1, score=1.0)

    row = dict(zip(FEATURE_NAMES, candidate_features(RerankQuery(text="q"), [hit])[0], strict=True))

    assert (row["semantic_found"], row["lexical_found"], row["semantic_cosine"]) == (0.0, 1.0, 0.0)
    assert LEXICAL_LEG in hit.ranks
    assert SEMANTIC_LEG not in hit.ranks


async def test_term_overlap_fake_ranks_by_shared_words() -> None:
    hits = [candidate("a", "nothing here", semantic_rank=1, lexical_rank=None, score=1.0)]
    hits.append(candidate("b", "port forwarding", semantic_rank=2, lexical_rank=None, score=0.5))

    reranked = await TermOverlapReranker().rerank(RerankQuery(text="port forwarding"), hits)

    assert [hit.chunk_id for hit in reranked] == ["b", "a"]


def test_the_bundled_model_loads_and_names_its_version() -> None:
    assert LearnedRanker.from_file().model_version.startswith("learned-ranker-")


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"format": "other"}, "not a poimen-linear-ranker"),
        ({"format": "poimen-linear-ranker", "format_version": 9}, "format_version 9"),
        ({"format": "poimen-linear-ranker", "format_version": 1, "features": ["x"]}, "other features"),
    ],
)
def test_a_bad_model_file_is_refused_with_its_reason(tmp_path, document, message) -> None:
    path = tmp_path / "model.json"
    path.write_text(json.dumps(document), encoding="utf-8")

    with pytest.raises(RankerModelError, match=message):
        LinearRankerModel.from_file(path)


def test_cross_encoder_needs_a_model_path() -> None:
    with pytest.raises(ValueError, match="RERANKER=cross-encoder needs RERANKER_MODEL_PATH"):
        Settings(reranker="cross-encoder")


def test_a_model_path_without_a_reranker_is_refused() -> None:
    with pytest.raises(ValueError, match="RERANKER=none"):
        Settings(reranker_model_path="/some/folder")


def test_rerank_top_n_is_validated() -> None:
    with pytest.raises(ValueError, match="rerank_top_n"):
        Settings(rerank_top_n=1)


def test_filters_of_a_plan_reach_the_rerank_query() -> None:
    moment = datetime(2026, 1, 1, tzinfo=UTC)
    plan = make_plan(filters=Filters(project_id="p", event_time_from=moment))

    assert rerank_query(plan).event_time_from == moment


def test_wiring_builds_the_configured_second_stage(tmp_path) -> None:
    assert build_second_stage(Settings()) is None
    stage = build_second_stage(Settings(reranker="learned", rerank_top_n=20))
    assert stage is not None
    assert stage.name == "learned"
    (tmp_path / "broken.json").write_text("{}", encoding="utf-8")
    with pytest.raises(ConfigurationError, match="RERANKER_MODEL_PATH"):
        build_second_stage(Settings(reranker="learned", reranker_model_path=tmp_path / "broken.json"))
