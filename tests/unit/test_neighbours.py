"""Neighbour sharing (`app/retrieval/neighbours.py`): hand-computed scores over small rankings."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from app.domain.models import Chunk, FusedHit, FusionMethod
from app.domain.reordering import NeighbourSharing
from app.knobs import SearchKnobs
from app.query.optimizer import QueryOptimizer
from app.query.planner import SearchOptions, build_plan
from app.retrieval.neighbours import NEIGHBOUR_CONTRIBUTION, share_neighbour_scores, turn_of

SESSION = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


def hit(document_id: str, score: float, *, event_time: datetime | None = SESSION) -> FusedHit:
    chunk = Chunk(
        chunk_id=f"{document_id}#0",
        document_id=document_id,
        project_id="p",
        text="t",
        source="s",
        level="turn",
        breadcrumb=(),
        section_title="",
        position=0,
        event_time=event_time,
    )
    return FusedHit(chunk=chunk, score=score, ranks={}, leg_scores={}, contributions={"lexical": score})


def test_turn_of_reads_the_trailing_turn_number() -> None:
    assert turn_of("conv-26:D3:7") == ("conv-26:D3", 7)


@pytest.mark.parametrize("document_id", ["4983", "notes:intro", ":7", "a:\uff17"])  # \uff17: a full-width 7
def test_turn_of_is_none_for_ids_that_name_no_turn(document_id: str) -> None:
    assert turn_of(document_id) is None


def test_a_turn_gains_its_share_of_the_best_neighbour_within_the_window() -> None:
    hits = [hit("s:5", 3.0), hit("s:1", 1.2), hit("s:7", 1.0), hit("s:8", 0.5)]

    shared = share_neighbour_scores(hits, NeighbourSharing(share=0.4, window_turns=2))

    # s:5 gains 0.4 x 1.0 (s:7); s:7 gains 0.4 x 3.0 (s:5, better than s:8); s:8 gains 0.4 x 1.0 (s:7);
    # s:1 has no turn within 2 (s:3 is not a candidate).
    assert {h.chunk.document_id: h.score for h in shared} == pytest.approx(
        {
            "s:5": 3.4,
            "s:7": 2.2,
            "s:8": 0.9,
            "s:1": 1.2,
        }
    )
    assert [h.chunk.document_id for h in shared] == ["s:5", "s:7", "s:1", "s:8"]


def test_the_gain_is_its_own_contribution() -> None:
    shared = share_neighbour_scores([hit("s:1", 2.0), hit("s:2", 1.0)], NeighbourSharing(share=0.5, window_turns=1))

    second = shared[1]

    assert second.contributions == pytest.approx({"lexical": 1.0, NEIGHBOUR_CONTRIBUTION: 1.0})
    assert second.score == pytest.approx(2.0)


def test_negative_neighbour_scores_give_nothing() -> None:
    hits = [hit("s:1", 0.5), hit("s:2", -1.0)]

    shared = share_neighbour_scores(hits, NeighbourSharing(share=0.5, window_turns=1))

    # s:1's only neighbour is below 0: no gain; s:2 gains 0.5 x 0.5.
    assert [(h.chunk.document_id, h.score) for h in shared] == [("s:1", 0.5), ("s:2", pytest.approx(-0.75))]
    assert NEIGHBOUR_CONTRIBUTION not in shared[0].contributions


def test_turns_of_other_sequences_are_not_neighbours() -> None:
    hits = [hit("a:1", 2.0), hit("b:2", 1.0)]

    shared = share_neighbour_scores(hits, NeighbourSharing(share=0.5, window_turns=1))

    assert [h.score for h in shared] == [2.0, 1.0]


def test_turns_of_other_sessions_or_undated_are_not_neighbours() -> None:
    later = datetime(2023, 5, 25, 13, 14, tzinfo=UTC)
    hits = [hit("ticket:1234", 2.0, event_time=None), hit("ticket:1235", 1.0, event_time=None), hit("s:1", 2.0)]
    hits += [hit("s:2", 1.0, event_time=later)]

    shared = share_neighbour_scores(hits, NeighbourSharing(share=0.5, window_turns=1))

    assert [(h.chunk.document_id, h.score) for h in shared] == [  # tied hits keep their order
        ("ticket:1234", 2.0),
        ("s:1", 2.0),
        ("ticket:1235", 1.0),
        ("s:2", 1.0),
    ]


def test_sharing_off_changes_nothing() -> None:
    hits = [hit("s:2", 1.0), hit("s:1", 2.0)]

    assert share_neighbour_scores(hits, NeighbourSharing()) == hits


def test_scores_are_read_before_any_hit_is_raised() -> None:
    forward = [hit("s:1", 1.0), hit("s:2", 1.0), hit("s:3", 1.0)]

    shared = share_neighbour_scores(forward, NeighbourSharing(share=1.0, window_turns=1))
    backward = share_neighbour_scores(forward[::-1], NeighbourSharing(share=1.0, window_turns=1))

    assert {h.chunk_id: h.score for h in shared} == {h.chunk_id: h.score for h in backward}
    assert [h.score for h in shared] == [2.0, 2.0, 2.0]
    assert [h.chunk_id for h in backward] == [h.chunk_id for h in forward[::-1]]  # ties keep their order


def test_the_plan_shares_only_in_hybrid_zscore_searches_by_default() -> None:
    optimizer = QueryOptimizer()
    analysis = optimizer.analyze("What did Caroline paint?")
    knobs = SearchKnobs()

    default = build_plan(analysis, SearchOptions(project="p"), knobs)
    rrf = build_plan(analysis, SearchOptions(project="p", fusion_method=FusionMethod.RRF), knobs)
    off = build_plan(analysis, SearchOptions(project="p"), SearchKnobs(neighbour_score_share=0.0))

    assert default.neighbours == NeighbourSharing(share=0.4, window_turns=2)
    assert not rrf.neighbours.changes_ranking
    assert not off.neighbours.changes_ranking
