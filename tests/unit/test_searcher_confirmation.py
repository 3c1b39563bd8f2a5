"""Read-your-deletes in the searcher: lexical hits the source of truth no longer holds are dropped.

With a `ConfirmingVectorIndex` a search opens its read of the store while it embeds the query, and a hybrid
search confirms the lexical hits in that read (one read of the store) as soon as the lexical leg is done;
otherwise the lexical leg asks the truth apart.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Self

import pytest

from app.domain.errors import EngineUnavailableError
from app.domain.models import LEXICAL_LEG, SEMANTIC_LEG, ScoredHit, SearchStrategy
from app.domain.ports import ConfirmingVectorIndex
from app.retrieval.legs import in_leg_order
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
    """A vector index over the truth's own rows: a read's confirmations come from `truth`.

    `opening`: set to hold the read's opening until the event is set; `events` records what the read did.
    """

    truth: FakeTruth = field(default_factory=lambda: FakeTruth({}))
    confirmations: list[tuple[str, ...]] = field(default_factory=list)
    opening: asyncio.Event | None = None
    exit_error: Exception | None = None
    begins_at_entry: bool = True  # False: as a busy store's read, begun only at its first call

    def read(self, project_id: str) -> FakeRead:
        return FakeRead(self, project_id)


@dataclass
class FakeRead:
    index: FakeConfirmingVectorIndex
    project_id: str
    began: bool = False

    async def __aenter__(self) -> Self:
        try:
            if self.index.opening is not None:
                await self.index.opening.wait()
        except asyncio.CancelledError:
            self.index.events.append("read abandoned while opening")
            raise
        if self.index.error is not None:
            raise self.index.error
        self.index.events.append("read opened")
        self.began = self.index.begins_at_entry
        return self

    async def __aexit__(self, *_: object) -> None:
        self.index.events.append("read ended")
        if self.index.exit_error is not None:
            raise self.index.exit_error

    async def search(self, embedding: Sequence[float], *, top_k: int, filters: Filters) -> list[ScoredHit]:
        assert filters.project_id == self.project_id
        self.began = True
        return await self.index.search(embedding, top_k=top_k, filters=filters)

    async def existing_chunks(
        self, project_id: str, chunk_ids: Sequence[str], *, filters: Filters | None = None
    ) -> dict[str, str]:
        assert project_id == self.project_id
        self.began = True
        self.index.confirmations.append(tuple(chunk_ids))
        self.index.events.append("confirmed")
        current = self.index.truth.current
        return {chunk_id: current[chunk_id] for chunk_id in chunk_ids if chunk_id in current}


@dataclass
class WaitingEmbedder(FakeEmbedder):
    """Embeds only once `until` holds for the vector index's events: what a search does while it embeds."""

    vector: FakeConfirmingVectorIndex | None = None
    until: str = ""

    async def embed_query(self, text: str, *, scope: str = "") -> list[float]:
        assert self.vector is not None
        self.vector.events.append("embedding")
        if self.vector.opening is not None:
            self.vector.opening.set()  # the read may open only once the embedding has begun
        while self.until not in self.vector.events:
            await asyncio.sleep(0.001)
        self.vector.events.append("embedded")
        return await super().embed_query(text, scope=scope)


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


async def test_the_read_opens_and_confirms_the_lexical_hits_while_the_query_is_embedded() -> None:
    # The embedding ends only once the lexical hits are confirmed: had the confirmation waited for the
    # embedding (as when it ran with the vector search), the embedder would run out of time.
    truth = FakeTruth(STORE)
    vector = FakeConfirmingVectorIndex(semantic_hits(("sem", 0.9)), truth=truth, opening=asyncio.Event())
    embedder = WaitingEmbedder(vector=vector, until="confirmed")
    searcher = HybridSearcher(vector=vector, lexical=FakeLexicalIndex(LEXICAL), embedder=embedder, truth=truth)

    async with asyncio.timeout(5):
        result = await searcher.search(make_plan(semantic_timeout_s=2.0))

    assert not result.degraded, result.degraded_reasons
    assert vector.events == [
        "embedding", "read opened", "confirmed", "embedded", "vector started", "vector ended", "read ended"
    ]  # fmt: skip
    assert sorted(ids(result)) == ["live", "sem"]


async def test_a_read_that_did_not_begin_at_once_confirms_the_lexical_hits_after_the_vector_search() -> None:
    # A busy store's read begins at its first call: confirming at once would begin it and hold its connection
    # through the embedding, so the confirmation waits for the vector search and runs in its transaction.
    truth = FakeTruth(STORE)
    vector = FakeConfirmingVectorIndex(semantic_hits(("sem", 0.9)), truth=truth, begins_at_entry=False)
    searcher = HybridSearcher(
        vector=vector, lexical=FakeLexicalIndex(LEXICAL), embedder=FakeEmbedder(delay_s=0.05), truth=truth
    )

    result = await searcher.search(make_plan())

    assert vector.events == ["read opened", "vector started", "vector ended", "confirmed", "read ended"]
    assert sorted(ids(result)) == ["live", "sem"]
    assert not result.degraded


async def test_behind_a_slow_embedding_the_lexical_hits_wait_half_their_time_then_confirm_on_their_own() -> None:
    # A busy store's read: the confirmation waits for the vector search. It waited with no bound, so a slow
    # embedding (a busy embedder) ran the lexical leg out of its time and the search lost it though its hits
    # were in: here every leg, 503 (the embedder ends only once they are confirmed).
    truth = FakeTruth(STORE)
    vector = FakeConfirmingVectorIndex(semantic_hits(("sem", 0.9)), truth=truth, begins_at_entry=False)
    embedder = WaitingEmbedder(vector=vector, until="confirmed")
    searcher = HybridSearcher(vector=vector, lexical=FakeLexicalIndex(LEXICAL), embedder=embedder, truth=truth)

    async with asyncio.timeout(5):
        result = await searcher.search(make_plan(lexical_timeout_s=0.2, semantic_timeout_s=2.0))

    assert vector.events == [
        "read opened", "embedding", "confirmed", "embedded", "vector started", "vector ended", "read ended"
    ]  # fmt: skip
    assert sorted(ids(result)) == ["live", "sem"]
    assert not result.degraded, result.degraded_reasons


@pytest.mark.parametrize("embedder_error", [None, EngineUnavailableError("no model", engine="fake-embedder")])
async def test_a_read_that_did_not_begin_at_once_still_confirms_when_no_search_comes_first(
    embedder_error: Exception | None,
) -> None:
    # The embedding failed (no vector search at all), or cascading, whose vector search waits for the lexical
    # leg: the confirmation must not wait for a search, or it would wait for ever.
    truth = FakeTruth(STORE)
    vector = FakeConfirmingVectorIndex(semantic_hits(("live", 0.9)), truth=truth, begins_at_entry=False)
    embedder = FakeEmbedder(error=embedder_error)
    searcher = HybridSearcher(vector=vector, lexical=FakeLexicalIndex(LEXICAL), embedder=embedder, truth=truth)
    strategy = SearchStrategy.HYBRID if embedder_error else SearchStrategy.CASCADING

    async with asyncio.timeout(5):
        result = await searcher.search(make_plan(strategy))

    assert vector.confirmations == [("rewritten", "deleted", "live")]
    assert ids(result) == ["live"]


async def test_a_semantic_search_opens_its_read_while_the_query_is_embedded() -> None:
    # The read opens only after the embedding began, and the embedding ends only after the read opened: both
    # at once, or neither (a read opened before embedding, or after it, would wait for ever: the test's timeout).
    vector = FakeConfirmingVectorIndex(semantic_hits(("sem", 0.9)), opening=asyncio.Event())
    embedder = WaitingEmbedder(vector=vector, until="read opened")
    searcher = HybridSearcher(vector=vector, lexical=FakeLexicalIndex(LEXICAL), embedder=embedder)

    async with asyncio.timeout(5):
        result = await searcher.search(make_plan(SearchStrategy.SEMANTIC, semantic_timeout_s=2.0))

    assert not result.degraded, result.degraded_reasons
    assert vector.events == ["embedding", "read opened", "embedded", "vector started", "vector ended", "read ended"]
    assert ids(result) == ["sem"]


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


async def test_when_the_embedding_fails_the_lexical_hits_are_still_confirmed_in_the_read() -> None:
    truth = FakeTruth(STORE)
    vector = FakeConfirmingVectorIndex(semantic_hits(("sem", 0.9)), truth=truth)
    embedder = FakeEmbedder(error=EngineUnavailableError("no model", engine="fake-embedder"))
    searcher = HybridSearcher(vector=vector, lexical=FakeLexicalIndex(LEXICAL), embedder=embedder, truth=truth)

    result = await searcher.search(make_plan())

    assert ids(result) == ["live"]
    assert vector.confirmations == [("rewritten", "deleted", "live")]
    assert truth.calls == []
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
    # In the legs' order, whichever failed first: the semantic leg waits on the read as the confirmation does.
    assert result.degraded_reasons == ("semantic_unavailable", "lexical_unconfirmed")
    assert [hit.chunk_id for hit in result.leg_hits[LEXICAL_LEG]] == ["rewritten", "deleted", "live"]


async def test_a_failed_lexical_leg_confirms_nothing_and_the_vector_leg_still_answers() -> None:
    truth = FakeTruth(STORE)
    vector = FakeConfirmingVectorIndex(semantic_hits(("sem", 0.9)), truth=truth)
    lexical = FakeLexicalIndex(error=EngineUnavailableError("down", engine="fake-lexical"))
    searcher = HybridSearcher(vector=vector, lexical=lexical, embedder=FakeEmbedder(), truth=truth)

    result = await searcher.search(make_plan())

    assert ids(result) == ["sem"]
    assert vector.confirmations == []
    assert result.degraded_reasons == ("lexical_unavailable",)


async def test_a_read_no_leg_used_is_abandoned_while_it_opens() -> None:
    # The embedding failed and the lexical leg found nothing to confirm: the search answers at once, and the
    # read still opening is given up rather than waited for.
    vector = FakeConfirmingVectorIndex(semantic_hits(("sem", 0.9)), opening=asyncio.Event())
    embedder = FakeEmbedder(error=EngineUnavailableError("no model", engine="fake-embedder"))
    searcher = HybridSearcher(vector=vector, lexical=FakeLexicalIndex([]), embedder=embedder, truth=FakeTruth(STORE))

    result = await searcher.search(make_plan())

    assert ids(result) == []
    assert vector.events == ["read abandoned while opening"]
    assert result.degraded_reasons == ("embedder_unavailable",)


async def test_a_read_that_cannot_end_cleanly_does_not_fail_the_search() -> None:
    truth = FakeTruth(STORE)
    vector = FakeConfirmingVectorIndex(
        semantic_hits(("sem", 0.9)), truth=truth, exit_error=EngineUnavailableError("gone", engine="fake-vector")
    )
    searcher = HybridSearcher(vector=vector, lexical=FakeLexicalIndex(LEXICAL), embedder=FakeEmbedder(), truth=truth)

    result = await searcher.search(make_plan())

    assert sorted(ids(result)) == ["live", "sem"]
    assert vector.events[-1] == "read ended"
    assert not result.degraded


async def test_a_lexical_search_whose_hits_the_store_cannot_check_is_degraded() -> None:
    truth = FakeTruth(STORE, error=EngineUnavailableError("down", engine="postgres"))
    searcher = HybridSearcher(
        vector=FakeVectorIndex(), lexical=FakeLexicalIndex(LEXICAL), embedder=FakeEmbedder(), truth=truth
    )

    result = await searcher.search(make_plan(strategy=SearchStrategy.LEXICAL))

    assert ids(result) == ["rewritten", "deleted", "live"]
    assert result.degraded_reasons == ("lexical_unconfirmed",)
    assert result.degraded


def test_reasons_are_named_in_the_legs_order_whichever_failed_first() -> None:
    came = ["lexical_unconfirmed", "rerank_timeout", "semantic_unavailable", "lexical_timeout", "embedder_timeout"]

    assert in_leg_order(came) == (
        "embedder_timeout", "semantic_unavailable", "lexical_unconfirmed", "lexical_timeout", "rerank_timeout"
    )  # fmt: skip
    assert in_leg_order([]) == ()
