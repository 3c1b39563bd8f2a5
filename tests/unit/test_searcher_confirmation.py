"""Read-your-deletes in the searcher: lexical hits the source of truth no longer holds are dropped.

With a `ConfirmingVectorIndex` a hybrid search confirms the lexical hits in the vector search's own
read (one read of the store); otherwise, and when the embedding fails, it asks the truth apart.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from app.domain.errors import EngineUnavailableError
from app.domain.models import LEXICAL_LEG, SEMANTIC_LEG, ScoredHit, SearchStrategy
from app.domain.ports import ConfirmingVectorIndex
from app.retrieval.searcher import HybridSearcher
from tests.unit.test_searcher import (
    FakeEmbedder,
    FakeLexicalIndex,
    FakeVectorIndex,
    chunk,
    ids,
    make_plan,
    semantic_hits,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from app.domain.models import Filters


def hashed(chunk_id: str, chunk_hash: str, score: float) -> ScoredHit:
    return ScoredHit(chunk=replace(chunk(chunk_id), chunk_hash=chunk_hash), score=score)


@dataclass
class FakeTruth:
    """What the store holds now: chunk id -> hash."""

    current: dict[str, str]
    error: Exception | None = None
    calls: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)
    filters_seen: list[Filters | None] = field(default_factory=list)

    async def existing_chunks(
        self, project_id: str, chunk_ids: Sequence[str], *, filters: Filters | None = None
    ) -> dict[str, str]:
        self.calls.append((project_id, tuple(chunk_ids)))
        self.filters_seen.append(filters)
        if self.error is not None:
            raise self.error
        return {chunk_id: self.current[chunk_id] for chunk_id in chunk_ids if chunk_id in self.current}


@dataclass
class FakeConfirmingVectorIndex(FakeVectorIndex):
    """A vector index over the truth's own rows: its confirmations come from `truth`."""

    truth: FakeTruth = field(default_factory=lambda: FakeTruth({}))
    confirmations: list[tuple[str, ...]] = field(default_factory=list)

    async def search_confirming(
        self, embedding: Sequence[float], *, top_k: int, filters: Filters, chunk_ids: Sequence[str]
    ) -> tuple[list[ScoredHit], dict[str, str]]:
        self.confirmations.append(tuple(chunk_ids))
        hits = await self.search(embedding, top_k=top_k, filters=filters)
        current = {chunk_id: self.truth.current[chunk_id] for chunk_id in chunk_ids if chunk_id in self.truth.current}
        return hits, current


# "live" is current; "rewritten" holds other content now (another hash); "deleted" is gone.
STORE = {"live": "h-live", "rewritten": "h-new", "sem": "h-sem"}
LEXICAL = [hashed("rewritten", "h-old", 9.0), hashed("deleted", "h-del", 8.0), hashed("live", "h-live", 7.0)]


def test_the_pgvector_shape_is_recognised_and_a_plain_index_is_not() -> None:
    assert isinstance(FakeConfirmingVectorIndex(), ConfirmingVectorIndex)
    assert not isinstance(FakeVectorIndex(), ConfirmingVectorIndex)


async def test_hybrid_confirms_the_lexical_hits_in_the_vector_read_and_drops_stale_ones() -> None:
    truth = FakeTruth(STORE)
    vector = FakeConfirmingVectorIndex(semantic_hits(("sem", 0.9)), truth=truth)
    searcher = HybridSearcher(vector=vector, lexical=FakeLexicalIndex(LEXICAL), embedder=FakeEmbedder(), truth=truth)

    result = await searcher.search(make_plan())

    assert sorted(ids(result)) == ["live", "sem"]
    assert vector.confirmations == [("rewritten", "deleted", "live")]
    assert truth.calls == []  # one read of the store, not two
    assert [hit.chunk_id for hit in result.leg_hits[LEXICAL_LEG]] == ["live"]
    assert result.legs[LEXICAL_LEG].result_count == 1
    assert not result.degraded


async def test_when_every_lexical_hit_is_current_the_leg_keeps_them_all_with_their_scores() -> None:
    current = [hashed("live", "h-live", 7.0), hashed("rewritten", "h-new", 6.5)]
    truth = FakeTruth(STORE)
    vector = FakeConfirmingVectorIndex(semantic_hits(("sem", 0.9)), truth=truth)
    searcher = HybridSearcher(vector=vector, lexical=FakeLexicalIndex(current), embedder=FakeEmbedder(), truth=truth)

    result = await searcher.search(make_plan())

    assert [(hit.chunk_id, hit.score) for hit in result.leg_hits[LEXICAL_LEG]] == [("live", 7.0), ("rewritten", 6.5)]
    assert result.legs[LEXICAL_LEG].result_count == 2
    assert sorted(ids(result)) == ["live", "rewritten", "sem"]


async def test_a_plain_vector_index_leaves_the_lexical_leg_to_ask_the_truth() -> None:
    truth = FakeTruth(STORE)
    vector = FakeVectorIndex(semantic_hits(("sem", 0.9)))
    searcher = HybridSearcher(vector=vector, lexical=FakeLexicalIndex(LEXICAL), embedder=FakeEmbedder(), truth=truth)

    plan = make_plan()
    result = await searcher.search(plan)

    assert sorted(ids(result)) == ["live", "sem"]
    assert truth.calls == [("p", ("rewritten", "deleted", "live"))]
    # The search's filters go with the confirmation: a hit whose stored tags no longer meet them is stale too.
    assert truth.filters_seen == [plan.filters]


async def test_when_the_embedding_fails_the_lexical_hits_are_confirmed_apart() -> None:
    truth = FakeTruth(STORE)
    vector = FakeConfirmingVectorIndex(semantic_hits(("sem", 0.9)), truth=truth)
    embedder = FakeEmbedder(error=EngineUnavailableError("no model", engine="fake-embedder"))
    searcher = HybridSearcher(vector=vector, lexical=FakeLexicalIndex(LEXICAL), embedder=embedder, truth=truth)

    result = await searcher.search(make_plan())

    assert ids(result) == ["live"]
    assert vector.confirmations == []
    assert truth.calls == [("p", ("rewritten", "deleted", "live"))]
    assert truth.filters_seen == [make_plan().filters]
    assert result.degraded_reasons == ("embedder_unavailable",)
    assert result.legs[SEMANTIC_LEG].error == "embedder_unavailable"


async def test_when_the_store_is_down_the_lexical_hits_stand_unconfirmed() -> None:
    down = EngineUnavailableError("down", engine="fake-vector")
    truth = FakeTruth(STORE, error=down)
    vector = FakeConfirmingVectorIndex(error=down, truth=truth)
    searcher = HybridSearcher(vector=vector, lexical=FakeLexicalIndex(LEXICAL), embedder=FakeEmbedder(), truth=truth)

    result = await searcher.search(make_plan())

    assert ids(result) == ["rewritten", "deleted", "live"]
    # Unchecked, the lexical hits may hold what was deleted since: the answer says so.
    assert result.degraded_reasons == ("semantic_unavailable", "lexical_unconfirmed")
    assert [hit.chunk_id for hit in result.leg_hits[LEXICAL_LEG]] == ["rewritten", "deleted", "live"]


async def test_a_failed_lexical_leg_confirms_nothing_and_the_vector_leg_still_answers() -> None:
    truth = FakeTruth(STORE)
    vector = FakeConfirmingVectorIndex(semantic_hits(("sem", 0.9)), truth=truth)
    lexical = FakeLexicalIndex(error=EngineUnavailableError("down", engine="fake-lexical"))
    searcher = HybridSearcher(vector=vector, lexical=lexical, embedder=FakeEmbedder(), truth=truth)

    result = await searcher.search(make_plan())

    assert ids(result) == ["sem"]
    assert vector.confirmations == [()]
    assert result.degraded_reasons == ("lexical_unavailable",)


async def test_a_lexical_search_whose_hits_the_store_cannot_check_is_degraded() -> None:
    truth = FakeTruth(STORE, error=EngineUnavailableError("down", engine="postgres"))
    searcher = HybridSearcher(
        vector=FakeVectorIndex(), lexical=FakeLexicalIndex(LEXICAL), embedder=FakeEmbedder(), truth=truth
    )

    result = await searcher.search(make_plan(strategy=SearchStrategy.LEXICAL))

    assert ids(result) == ["rewritten", "deleted", "live"]
    assert result.degraded_reasons == ("lexical_unconfirmed",)
    assert result.degraded
