"""HybridSearcher against small in-test fakes of the ports: strategies, fallbacks, timeouts."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import pytest

from app.domain.errors import AllEnginesFailedError, EngineTimeoutError, EngineUnavailableError
from app.domain.models import (
    LEXICAL_LEG,
    SEMANTIC_LEG,
    Chunk,
    Filters,
    FusionMethod,
    FusionSettings,
    LexicalQuery,
    ScoredHit,
    SearchPlan,
    SearchStrategy,
)
from app.domain.reordering import EvidencePreferences, NeighbourSharing
from app.retrieval.searcher import HybridSearcher

if TYPE_CHECKING:
    from collections.abc import Sequence


def chunk(chunk_id: str, document_id: str | None = None) -> Chunk:
    return Chunk(
        chunk_id=chunk_id,
        document_id=document_id or f"doc-{chunk_id}",
        project_id="p",
        text=chunk_id,
        source=f"{chunk_id}.md",
        level="L1",
        breadcrumb=(),
        section_title="",
        position=0,
    )


@dataclass
class FakeEmbedder:
    error: Exception | None = None
    delay_s: float = 0.0
    name: str = "fake-embedder"
    model_name: str = "fake"
    dimensions: int = 2
    texts: list[str] = field(default_factory=list)

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return [[1.0, 0.0] for _ in texts]

    async def embed_query(self, text: str, *, scope: str = "") -> list[float]:
        self.texts.append(text)
        await asyncio.sleep(self.delay_s)
        if self.error is not None:
            raise self.error
        return [1.0, 0.0]


@dataclass
class FakeVectorIndex:
    """Returns `hits` (best first), honouring `filters.chunk_ids` and `top_k`."""

    hits: list[ScoredHit] = field(default_factory=list)
    error: Exception | None = None
    delay_s: float = 0.0
    name: str = "fake-vector"
    calls: list[tuple[int, Filters]] = field(default_factory=list)
    events: list[str] = field(default_factory=list)

    async def search(self, embedding: Sequence[float], *, top_k: int, filters: Filters) -> list[ScoredHit]:
        self.calls.append((top_k, filters))
        self.events.append("vector started")
        await asyncio.sleep(self.delay_s)
        self.events.append("vector ended")
        if self.error is not None:
            raise self.error
        allowed = None if filters.chunk_ids is None else set(filters.chunk_ids)
        return [h for h in self.hits if allowed is None or h.chunk_id in allowed][:top_k]

    async def ping(self) -> None:
        return None


@dataclass
class FakeLexicalIndex:
    hits: list[ScoredHit] = field(default_factory=list)
    error: Exception | None = None
    delay_s: float = 0.0
    name: str = "fake-lexical"
    calls: list[tuple[LexicalQuery, int, Filters]] = field(default_factory=list)
    events: list[str] = field(default_factory=list)

    async def search(self, query: LexicalQuery, *, top_k: int, filters: Filters) -> list[ScoredHit]:
        self.calls.append((query, top_k, filters))
        self.events.append("lexical started")
        await asyncio.sleep(self.delay_s)
        self.events.append("lexical ended")
        if self.error is not None:
            raise self.error
        return self.hits[:top_k]

    async def replace_documents(self, documents) -> None:
        return None

    async def delete_project(self, project_id: str) -> None:
        return None

    async def ping(self) -> None:
        return None


def semantic_hits(*pairs: tuple[str, float]) -> list[ScoredHit]:
    return [ScoredHit(chunk=chunk(cid), score=score) for cid, score in pairs]


lexical_hits = semantic_hits


def make_plan(strategy: SearchStrategy = SearchStrategy.HYBRID, **overrides) -> SearchPlan:
    plan = SearchPlan(
        semantic_text="how do i forward a port",
        lexical_query=LexicalQuery(text="forward port"),
        filters=Filters(project_id="p"),
        strategy=strategy,
        strategy_confidence=0.9,
        fusion=FusionSettings(method=FusionMethod.RRF, rrf_k=60, weights={}),
        semantic_retrieve_k=50,
        lexical_retrieve_k=50,
        limit=10,
        cascading_multiplier=4,
        max_chunks_per_document=None,
        min_score=None,
        # Far beyond any fake's delay, so a loaded machine never turns a leg into a timeout; the timeout tests
        # set their own 0.05 s.
        lexical_timeout_s=30.0,
        semantic_timeout_s=30.0,
        evidence=EvidencePreferences(),
        session_cap=None,
        neighbours=NeighbourSharing(),
    )
    return replace(plan, **overrides)


def searcher(vector=None, lexical=None, embedder=None) -> HybridSearcher:
    return HybridSearcher(
        vector=vector or FakeVectorIndex(), lexical=lexical or FakeLexicalIndex(), embedder=embedder or FakeEmbedder()
    )


def ids(result) -> list[str]:
    return [h.chunk_id for h in result.hits]


# --- hybrid --------------------------------------------------------------------------------------


async def test_hybrid_fuses_both_legs_with_rrf() -> None:
    vector = FakeVectorIndex(semantic_hits(("a", 0.9), ("b", 0.8)))
    lexical = FakeLexicalIndex(lexical_hits(("b", 8.0), ("c", 7.0)))
    embedder = FakeEmbedder()

    result = await searcher(vector, lexical, embedder).search(make_plan())

    assert ids(result) == ["b", "a", "c"]
    assert result.hits[0].score == pytest.approx(1 / 62 + 1 / 61)
    assert dict(result.hits[0].ranks) == {SEMANTIC_LEG: 2, LEXICAL_LEG: 1}
    assert not result.degraded
    assert result.strategy is SearchStrategy.HYBRID
    assert result.fusion_method is FusionMethod.RRF
    assert embedder.texts == ["how do i forward a port"]
    assert lexical.calls[0][0].text == "forward port"
    assert {"embed", "semantic", "lexical", "fusion", "total"} <= result.stage_ms.keys()
    assert result.legs[SEMANTIC_LEG].result_count == 2
    assert result.legs[LEXICAL_LEG].result_count == 2


async def test_hybrid_asks_each_leg_for_retrieve_k_with_the_plan_filters() -> None:
    vector, lexical = FakeVectorIndex(), FakeLexicalIndex()
    filters = Filters(project_id="p", tags=("ops",))

    await searcher(vector, lexical).search(make_plan(semantic_retrieve_k=30, lexical_retrieve_k=30, filters=filters))

    assert vector.calls == [(30, filters)]
    assert [(top_k, f) for _, top_k, f in lexical.calls] == [(30, filters)]


async def test_hybrid_runs_the_legs_concurrently() -> None:
    events: list[str] = []
    vector = FakeVectorIndex(semantic_hits(("a", 0.9)), delay_s=0.3, events=events)
    lexical = FakeLexicalIndex(lexical_hits(("b", 1.0)), delay_s=0.3, events=events)

    result = await searcher(vector, lexical).search(make_plan())

    # Ordering, not time: one after the other would end the first leg before the second starts.
    assert sorted(events[:2]) == ["lexical started", "vector started"]
    assert sorted(ids(result)) == ["a", "b"]


async def test_hybrid_applies_the_limit_after_fusion() -> None:
    vector = FakeVectorIndex(semantic_hits(*[(f"s{i}", 1 - i / 100) for i in range(20)]))
    lexical = FakeLexicalIndex(lexical_hits(*[(f"l{i}", 20 - i) for i in range(20)]))

    result = await searcher(vector, lexical).search(make_plan(limit=5))

    assert len(result.hits) == 5


async def test_hybrid_collapses_per_document_then_applies_min_score() -> None:
    hits = [
        ScoredHit(chunk=chunk("a1", "A"), score=0.9),
        ScoredHit(chunk=chunk("a2", "A"), score=0.8),
        ScoredHit(chunk=chunk("b1", "B"), score=0.7),
        ScoredHit(chunk=chunk("c1", "C"), score=0.1),
    ]
    plan = make_plan(
        SearchStrategy.SEMANTIC,
        max_chunks_per_document=1,
        min_score=0.5,
        fusion=FusionSettings(FusionMethod.RRF, 60, {}),
    )

    result = await searcher(FakeVectorIndex(hits)).search(plan)

    assert ids(result) == ["a1", "b1"]


# --- fallbacks -----------------------------------------------------------------------------------


async def test_lexical_failure_falls_back_to_semantic_only() -> None:
    vector = FakeVectorIndex(semantic_hits(("a", 0.9), ("b", 0.8)))
    lexical = FakeLexicalIndex(error=EngineUnavailableError("down", engine="fake-lexical"))

    result = await searcher(vector, lexical).search(make_plan())

    assert ids(result) == ["a", "b"]
    assert result.degraded_reasons == ("lexical_unavailable",)
    assert result.legs[LEXICAL_LEG].error == "lexical_unavailable"
    assert result.legs[LEXICAL_LEG].result_count == 0


async def test_slow_lexical_leg_times_out_and_semantic_results_are_returned() -> None:
    vector = FakeVectorIndex(semantic_hits(("a", 0.9)))
    lexical = FakeLexicalIndex(lexical_hits(("b", 1.0)), delay_s=5.0)

    result = await searcher(vector, lexical).search(make_plan(lexical_timeout_s=0.05))

    assert ids(result) == ["a"]
    assert result.degraded_reasons == ("lexical_timeout",)
    assert lexical.events == ["lexical started"]  # answered without waiting for the slow leg to end


async def test_adapter_timeout_error_counts_as_a_timeout() -> None:
    lexical = FakeLexicalIndex(error=EngineTimeoutError("slow", engine="fake-lexical"))

    result = await searcher(FakeVectorIndex(semantic_hits(("a", 0.9))), lexical).search(make_plan())

    assert result.degraded_reasons == ("lexical_timeout",)


async def test_embedder_failure_falls_back_to_lexical_only() -> None:
    vector = FakeVectorIndex(semantic_hits(("a", 0.9)))
    lexical = FakeLexicalIndex(lexical_hits(("b", 8.0), ("c", 7.0)))
    embedder = FakeEmbedder(error=EngineUnavailableError("no model", engine="fake-embedder"))

    result = await searcher(vector, lexical, embedder).search(make_plan())

    assert ids(result) == ["b", "c"]
    assert result.degraded_reasons == ("embedder_unavailable",)
    assert result.legs[SEMANTIC_LEG].error == "embedder_unavailable"
    assert vector.calls == []


async def test_vector_store_failure_falls_back_to_lexical_only() -> None:
    vector = FakeVectorIndex(error=EngineUnavailableError("down", engine="fake-vector"))
    lexical = FakeLexicalIndex(lexical_hits(("b", 8.0)))

    result = await searcher(vector, lexical).search(make_plan())

    assert ids(result) == ["b"]
    assert result.degraded_reasons == ("semantic_unavailable",)


async def test_slow_semantic_leg_times_out() -> None:
    vector = FakeVectorIndex(semantic_hits(("a", 0.9)), delay_s=5.0)
    lexical = FakeLexicalIndex(lexical_hits(("b", 8.0)))

    result = await searcher(vector, lexical).search(make_plan(semantic_timeout_s=0.05))

    assert ids(result) == ["b"]
    assert result.degraded_reasons == ("semantic_timeout",)


async def test_slow_embedder_times_out_within_the_semantic_deadline() -> None:
    embedder = FakeEmbedder(delay_s=5.0)

    result = await searcher(
        FakeVectorIndex(semantic_hits(("a", 0.9))), FakeLexicalIndex(lexical_hits(("b", 1.0))), embedder
    ).search(make_plan(semantic_timeout_s=0.05))

    assert ids(result) == ["b"]
    assert result.degraded_reasons == ("embedder_timeout",)


async def test_both_legs_failing_raises_with_every_reason() -> None:
    vector = FakeVectorIndex(error=EngineUnavailableError("down", engine="fake-vector"))
    lexical = FakeLexicalIndex(delay_s=5.0)

    with pytest.raises(AllEnginesFailedError) as error:
        await searcher(vector, lexical).search(make_plan(lexical_timeout_s=0.05))

    assert set(error.value.reasons) == {"semantic_unavailable", "lexical_timeout"}


async def test_a_bug_in_an_adapter_propagates_and_cancels_the_other_leg() -> None:
    vector = FakeVectorIndex(error=KeyError("bug"))
    lexical = FakeLexicalIndex(delay_s=5.0)

    with pytest.raises(KeyError):
        await searcher(vector, lexical).search(make_plan())


async def test_semantic_strategy_falls_back_to_lexical() -> None:
    vector = FakeVectorIndex(error=EngineUnavailableError("down", engine="fake-vector"))
    lexical = FakeLexicalIndex(lexical_hits(("b", 8.0)))

    result = await searcher(vector, lexical).search(make_plan(SearchStrategy.SEMANTIC))

    assert ids(result) == ["b"]
    assert result.degraded_reasons == ("semantic_unavailable",)
    assert result.strategy is SearchStrategy.SEMANTIC


async def test_lexical_strategy_falls_back_to_semantic() -> None:
    vector = FakeVectorIndex(semantic_hits(("a", 0.9)))
    lexical = FakeLexicalIndex(error=EngineUnavailableError("down", engine="fake-lexical"))

    result = await searcher(vector, lexical).search(make_plan(SearchStrategy.LEXICAL))

    assert ids(result) == ["a"]
    assert result.degraded_reasons == ("lexical_unavailable",)


async def test_single_leg_strategy_with_both_legs_down_raises() -> None:
    vector = FakeVectorIndex(error=EngineUnavailableError("down", engine="fake-vector"))
    lexical = FakeLexicalIndex(error=EngineUnavailableError("down", engine="fake-lexical"))

    with pytest.raises(AllEnginesFailedError) as error:
        await searcher(vector, lexical).search(make_plan(SearchStrategy.LEXICAL))

    assert error.value.reasons == ("lexical_unavailable", "semantic_unavailable")


# --- single-leg strategies -----------------------------------------------------------------------


async def test_semantic_strategy_uses_only_the_vector_leg_with_its_similarity() -> None:
    vector = FakeVectorIndex(semantic_hits(("a", 0.9), ("b", 0.4)))
    lexical = FakeLexicalIndex(lexical_hits(("c", 8.0)))

    result = await searcher(vector, lexical).search(make_plan(SearchStrategy.SEMANTIC))

    assert ids(result) == ["a", "b"]
    assert result.hits[0].score == 0.9
    assert lexical.calls == []
    assert LEXICAL_LEG not in result.legs


async def test_lexical_strategy_uses_only_the_lexical_leg() -> None:
    embedder = FakeEmbedder()
    lexical = FakeLexicalIndex(lexical_hits(("c", 8.0), ("d", 2.0)))

    result = await searcher(FakeVectorIndex(semantic_hits(("a", 0.9))), lexical, embedder).search(
        make_plan(SearchStrategy.LEXICAL)
    )

    assert ids(result) == ["c", "d"]
    assert result.hits[0].score == 8.0
    assert embedder.texts == []


# --- cascading -----------------------------------------------------------------------------------


async def test_cascading_ranks_lexical_candidates_by_vector_similarity() -> None:
    lexical = FakeLexicalIndex(lexical_hits(("a", 9.0), ("b", 5.0), ("c", 1.0)))
    vector = FakeVectorIndex(semantic_hits(("z", 0.99), ("c", 0.9), ("a", 0.4), ("b", 0.2)))
    filters = Filters(project_id="p", tags=("net",))

    result = await searcher(vector, lexical).search(
        make_plan(
            SearchStrategy.CASCADING,
            semantic_retrieve_k=5,
            lexical_retrieve_k=5,
            cascading_multiplier=4,
            filters=filters,
        )
    )

    assert ids(result) == ["c", "a", "b"]  # "z" was not a lexical candidate
    assert lexical.calls[0][1] == 20  # retrieve_k x multiplier
    top_k, restricted = vector.calls[0]
    assert restricted.chunk_ids == ("a", "b", "c")
    assert restricted.tags == ("net",)
    assert top_k == 3
    assert result.hits[0].score == 0.9
    assert dict(result.hits[0].ranks) == {SEMANTIC_LEG: 1, LEXICAL_LEG: 3}
    assert dict(result.hits[0].leg_scores) == {SEMANTIC_LEG: 0.9, LEXICAL_LEG: 1.0}
    assert not result.degraded


async def test_cascading_with_lexical_down_is_semantic_only_over_the_filters() -> None:
    lexical = FakeLexicalIndex(error=EngineUnavailableError("down", engine="fake-lexical"))
    vector = FakeVectorIndex(semantic_hits(("z", 0.99), ("c", 0.9)))

    result = await searcher(vector, lexical).search(make_plan(SearchStrategy.CASCADING))

    assert ids(result) == ["z", "c"]
    assert vector.calls[0][1].chunk_ids is None
    assert result.degraded_reasons == ("lexical_unavailable",)


async def test_cascading_with_vectors_down_returns_the_lexical_candidates() -> None:
    lexical = FakeLexicalIndex(lexical_hits(("a", 9.0), ("b", 5.0)))
    vector = FakeVectorIndex(error=EngineUnavailableError("down", engine="fake-vector"))

    result = await searcher(vector, lexical).search(make_plan(SearchStrategy.CASCADING))

    assert ids(result) == ["a", "b"]
    assert result.hits[0].score == 9.0
    assert result.degraded_reasons == ("semantic_unavailable",)


async def test_cascading_without_lexical_candidates_searches_vectors_over_the_filters() -> None:
    vector = FakeVectorIndex(semantic_hits(("z", 0.7)))

    result = await searcher(vector, FakeLexicalIndex()).search(make_plan(SearchStrategy.CASCADING))

    assert ids(result) == ["z"]
    assert vector.calls[0][1].chunk_ids is None
    assert not result.degraded


async def test_cascading_with_everything_down_raises() -> None:
    lexical = FakeLexicalIndex(error=EngineUnavailableError("down", engine="fake-lexical"))
    embedder = FakeEmbedder(error=EngineUnavailableError("down", engine="fake-embedder"))

    with pytest.raises(AllEnginesFailedError) as error:
        await searcher(FakeVectorIndex(), lexical, embedder).search(make_plan(SearchStrategy.CASCADING))

    assert set(error.value.reasons) == {"lexical_unavailable", "embedder_unavailable"}


# --- each leg's own ranking ----------------------------------------------------------------------


def leg_ids(result, leg: str) -> list[str]:
    return [hit.chunk_id for hit in result.leg_hits[leg]]


async def test_hybrid_keeps_each_legs_own_ranking_with_raw_scores_beyond_the_limit() -> None:
    vector = FakeVectorIndex(semantic_hits(("a", 0.9), ("b", 0.8), ("d", 0.1)))
    lexical = FakeLexicalIndex(lexical_hits(("b", 8.0), ("c", 7.0)))

    result = await searcher(vector, lexical).search(make_plan(limit=1))

    assert ids(result) == ["b"]
    assert leg_ids(result, SEMANTIC_LEG) == ["a", "b", "d"]
    assert leg_ids(result, LEXICAL_LEG) == ["b", "c"]
    assert [hit.score for hit in result.leg_hits[LEXICAL_LEG]] == [8.0, 7.0]
    assert result.leg_hits[SEMANTIC_LEG][0].document_id == "doc-a"


async def test_a_failed_leg_has_no_ranking_and_an_empty_leg_an_empty_one() -> None:
    vector = FakeVectorIndex(error=EngineUnavailableError("down", engine="fake-vector"))

    result = await searcher(vector, FakeLexicalIndex()).search(make_plan())

    assert SEMANTIC_LEG not in result.leg_hits
    assert result.leg_hits[LEXICAL_LEG] == ()


async def test_single_leg_strategy_keeps_only_the_leg_that_ran() -> None:
    vector = FakeVectorIndex(semantic_hits(("a", 0.9)))

    result = await searcher(vector, FakeLexicalIndex(lexical_hits(("b", 1.0)))).search(
        make_plan(SearchStrategy.SEMANTIC)
    )

    assert set(result.leg_hits) == {SEMANTIC_LEG}


async def test_cascading_keeps_the_lexical_candidates_and_their_vector_ranking() -> None:
    lexical = FakeLexicalIndex(lexical_hits(("a", 9.0), ("b", 5.0)))
    vector = FakeVectorIndex(semantic_hits(("z", 0.99), ("b", 0.9), ("a", 0.4)))

    result = await searcher(vector, lexical).search(make_plan(SearchStrategy.CASCADING))

    assert leg_ids(result, LEXICAL_LEG) == ["a", "b"]
    assert leg_ids(result, SEMANTIC_LEG) == ["b", "a"]


# --- collapse: deeper candidates for a short page -------------------------------------------------


def crowded(*, crowding: int, others: int) -> list[ScoredHit]:
    """`crowding` chunks of document "big" scoring above `others` one-chunk documents, best first."""
    big = [ScoredHit(chunk=chunk(f"big-{n:03}", "big"), score=0.99 - n / 10_000) for n in range(crowding)]
    rest = [ScoredHit(chunk=chunk(f"other-{n:02}"), score=0.5 - n / 100) for n in range(others)]
    return big + rest


def documents(result) -> list[str]:
    return [hit.chunk.document_id for hit in result.hits]


@pytest.mark.parametrize("strategy", [SearchStrategy.SEMANTIC, SearchStrategy.HYBRID])
async def test_collapse_searches_deeper_until_the_page_is_full(strategy: SearchStrategy) -> None:
    hits = crowded(crowding=120, others=12)
    vector, lexical, embedder = FakeVectorIndex(hits), FakeLexicalIndex(hits), FakeEmbedder()
    plan = make_plan(strategy, max_chunks_per_document=1)

    result = await searcher(vector, lexical, embedder).search(plan)

    # 50 candidates were all of "big": one hit. 200 hold every document.
    assert documents(result) == ["big", *(f"doc-other-{n:02}" for n in range(9))]
    assert [top_k for top_k, _ in vector.calls] == [50, 200]
    assert embedder.texts == ["how do i forward a port"]  # embedded once, reused by the deeper search
    assert result.legs[SEMANTIC_LEG].result_count == 132
    assert not result.degraded


async def test_a_page_that_collapsing_leaves_full_is_searched_once() -> None:
    vector = FakeVectorIndex(crowded(crowding=20, others=30))

    result = await searcher(vector).search(make_plan(SearchStrategy.SEMANTIC, max_chunks_per_document=1))

    assert len(result.hits) == 10
    assert [top_k for top_k, _ in vector.calls] == [50]


async def test_a_leg_that_returned_less_than_asked_is_not_searched_deeper() -> None:
    vector = FakeVectorIndex(crowded(crowding=40, others=3))  # 43 chunks: the leg holds no more

    result = await searcher(vector).search(make_plan(SearchStrategy.SEMANTIC, max_chunks_per_document=1))

    assert len(result.hits) == 4
    assert [top_k for top_k, _ in vector.calls] == [50]


async def test_a_page_ended_by_min_score_is_not_searched_deeper() -> None:
    vector = FakeVectorIndex(crowded(crowding=30, others=40))  # the other documents score 0.5 and below
    plan = make_plan(SearchStrategy.SEMANTIC, max_chunks_per_document=1, min_score=0.9)

    result = await searcher(vector).search(plan)

    assert documents(result) == ["big"]
    assert [top_k for top_k, _ in vector.calls] == [50]


async def test_a_deeper_page_that_min_score_ends_sooner_leaves_the_first_page_standing() -> None:
    # "b" is the semantic leg's best alone; "x" enters both legs just below the 50 candidates and fuses above
    # "b" with a low relevance, which then caps b's: the deeper page would end at "x", before "b".
    bigs = [ScoredHit(chunk=chunk(f"big-{n:03}", "big"), score=0.94 - n / 10_000) for n in range(60)]
    fillers = [ScoredHit(chunk=chunk(f"f-{n:03}"), score=0.2 - n / 10_000) for n in range(200)]
    vector = FakeVectorIndex([*semantic_hits(("b", 0.95)), *bigs, *semantic_hits(("x", 0.3)), *fillers])
    lexical_bigs = [ScoredHit(chunk=chunk(f"big-{n:03}", "big"), score=1000.0 - n) for n in range(60)]
    lexical = FakeLexicalIndex([*lexical_bigs, *lexical_hits(("x", 0.1)), *fillers])
    plan = make_plan(SearchStrategy.HYBRID, max_chunks_per_document=1, min_score=0.4)

    result = await searcher(vector, lexical).search(plan)

    assert ids(result) == ["big-000", "b"]  # not ["big-000"]: asking for more documents never returns fewer
    assert [top_k for top_k, _ in vector.calls] == [50, 200]
    assert result.hits[1].readable_score == pytest.approx(0.95 / 2)


async def test_deeper_searches_stop_at_the_bound() -> None:
    vector = FakeVectorIndex(crowded(crowding=1500, others=12))  # "big" fills even the deepest candidates

    result = await searcher(vector).search(make_plan(SearchStrategy.SEMANTIC, max_chunks_per_document=1))

    assert documents(result) == ["big"]
    assert [top_k for top_k, _ in vector.calls] == [50, 200, 800, 1000]


async def test_a_cascading_search_asks_its_lexical_leg_for_no_more_than_the_bound() -> None:
    hits = crowded(crowding=5000, others=12)
    vector, lexical = FakeVectorIndex(hits), FakeLexicalIndex(hits)
    plan = make_plan(SearchStrategy.CASCADING, max_chunks_per_document=1)  # 50 x 4 = 200 lexical candidates

    result = await searcher(vector, lexical).search(plan)

    # Not [200, 800, 3200, 4000]: the lexical leg's ask is what the bound of 1,000 holds to.
    assert [top_k for _, top_k, _ in lexical.calls] == [200, 800, 1000]
    assert [top_k for top_k, _ in vector.calls] == [200, 800, 1000]
    assert len(result.leg_hits[LEXICAL_LEG]) == 1000


async def test_a_leg_below_the_bound_is_searched_deeper_while_the_other_is_at_it() -> None:
    # "big" fills the semantic leg's 1,000 candidates; the lexical leg's 50 only.
    vector, lexical = (
        FakeVectorIndex(crowded(crowding=1500, others=12)),
        FakeLexicalIndex(crowded(crowding=120, others=12)),
    )
    plan = make_plan(SearchStrategy.HYBRID, max_chunks_per_document=1, semantic_retrieve_k=1000)

    result = await searcher(vector, lexical).search(plan)

    assert [top_k for _, top_k, _ in lexical.calls] == [50, 200]
    assert [top_k for top_k, _ in vector.calls] == [1000, 1000]
    assert len(result.hits) == 10
