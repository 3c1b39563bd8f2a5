"""Fusion: the acceptance cases of reference/rrf-fusion-task.md plus weighted, z-score and invariants."""

from __future__ import annotations

import copy
import dataclasses
import functools
import statistics
from typing import TYPE_CHECKING

import pytest

from app.domain.models import (
    LEXICAL_LEG,
    SEMANTIC_LEG,
    Chunk,
    FusedHit,
    FusionMethod,
    FusionSettings,
    LexicalQuery,
    ScoredHit,
)
from app.retrieval.fusion import (
    IDENTICAL_SCORES_Z,
    cascade_ranking,
    fuse,
    min_max_normalize,
    rank_single_leg,
    reciprocal_rank_fusion,
    weighted_score_fusion,
    zscore_fusion,
)
from app.retrieval.postprocess import collapse_per_document, returned_hits
from app.retrieval.relevance import BM25_HALF_RELEVANCE, BM25_HALF_TERMS, bm25_half_for, readable_relevance

if TYPE_CHECKING:
    from collections.abc import Iterator

REFERENCE_WEIGHTS = {SEMANTIC_LEG: 0.6, LEXICAL_LEG: 0.4}
"""The reference notes' 0.6 / 0.4, given explicitly: fusion has no tuned defaults of its own."""


def hit(chunk_id: str, score: float = 1.0, *, document_id: str | None = None) -> ScoredHit:
    chunk = Chunk(
        chunk_id=chunk_id,
        document_id=document_id or f"doc-{chunk_id}",
        project_id="p",
        text=f"text of {chunk_id}",
        source=f"{chunk_id}.md",
        level="L1",
        breadcrumb=(),
        section_title="",
        position=0,
    )
    return ScoredHit(chunk=chunk, score=score)


def legs(semantic: list[ScoredHit], lexical: list[ScoredHit]) -> dict[str, list[ScoredHit]]:
    return {SEMANTIC_LEG: semantic, LEXICAL_LEG: lexical}


def ids(fused) -> list[str]:
    return [h.chunk_id for h in fused]


# --- RRF: acceptance of rrf-fusion-task.md -------------------------------------------------------


def test_rrf_ranks_chunk_found_by_both_legs_first() -> None:
    ranked = legs([hit("a", 0.9), hit("b", 0.8)], [hit("a", 8.0), hit("c", 7.0)])

    fused = reciprocal_rank_fusion(ranked, k=60)

    assert fused[0].chunk_id == "a"
    assert fused[0].score == pytest.approx(1 / 61 + 1 / 61)


def test_rrf_single_leg_hit_scores_one_over_61() -> None:
    fused = reciprocal_rank_fusion(legs([hit("a", 0.9)], []), k=60)

    assert ids(fused) == ["a"]
    assert fused[0].score == pytest.approx(1 / 61)
    assert dict(fused[0].ranks) == {SEMANTIC_LEG: 1}


def test_rrf_of_empty_lists_is_empty() -> None:
    assert reciprocal_rank_fusion(legs([], []), k=60) == []
    assert reciprocal_rank_fusion({}, k=60) == []


def test_rrf_swapped_ranks_tie_exactly_and_break_on_chunk_id() -> None:
    ranked = legs([hit("b", 0.9), hit("a", 0.8)], [hit("a", 8.0), hit("b", 7.0)])

    fused = reciprocal_rank_fusion(ranked, k=60)

    assert fused[0].score == fused[1].score
    assert ids(fused) == ["a", "b"]  # deterministic: equal scores order by chunk id


def test_rrf_output_never_exceeds_limit() -> None:
    ranked = legs([hit(f"s{i}") for i in range(20)], [hit(f"l{i}") for i in range(20)])

    for limit in (0, 1, 5, 10, 40, 100):
        assert len(reciprocal_rank_fusion(ranked, limit=limit, k=60)) == min(limit, 40)


def test_rrf_false_pass_fused_order_is_not_original_score_order() -> None:
    # "x" is #1 in semantic with the highest raw score but absent from lexical; "z" is #3 in
    # semantic and #1 in lexical. Sorting by raw score would put x first; RRF must put z first.
    ranked = legs([hit("x", 0.99), hit("y", 0.98), hit("z", 0.50)], [hit("z", 3.0)])

    fused = reciprocal_rank_fusion(ranked, k=60)

    assert ids(fused)[0] == "z"
    assert fused[0].score == pytest.approx(1 / 63 + 1 / 61)
    assert ids(fused).index("z") < ids(fused).index("x")


def test_rrf_reports_ranks_raw_scores_and_contributions() -> None:
    ranked = legs([hit("a", 0.95), hit("b", 0.88)], [hit("b", 8.5), hit("a", 7.2)])

    fused = {h.chunk_id: h for h in reciprocal_rank_fusion(ranked, k=60)}

    assert dict(fused["a"].ranks) == {SEMANTIC_LEG: 1, LEXICAL_LEG: 2}
    assert dict(fused["a"].leg_scores) == {SEMANTIC_LEG: 0.95, LEXICAL_LEG: 7.2}
    assert fused["a"].contributions[SEMANTIC_LEG] == pytest.approx(1 / 61)
    assert fused["a"].contributions[LEXICAL_LEG] == pytest.approx(1 / 62)


def test_rrf_k_changes_scores_and_can_change_order() -> None:
    # a: rank 1 in one leg only; b: rank 4 in both. Small k favours top ranks, large k favours agreement.
    ranked = legs([hit("a"), hit("s2"), hit("s3"), hit("b")], [hit("l1"), hit("l2"), hit("l3"), hit("b")])

    small_k = {h.chunk_id: h.score for h in reciprocal_rank_fusion(ranked, k=1)}
    large_k = reciprocal_rank_fusion(ranked, k=60)

    assert small_k["a"] == pytest.approx(1 / 2)
    assert small_k["b"] == pytest.approx(2 / 5)
    assert ids(large_k)[0] == "b"
    assert large_k[0].score == pytest.approx(2 / 64)


def test_rrf_weights_scale_each_legs_contribution() -> None:
    ranked = legs([hit("s")], [hit("l")])

    fused = reciprocal_rank_fusion(ranked, weights={SEMANTIC_LEG: 1.0, LEXICAL_LEG: 3.0}, k=60)

    assert ids(fused) == ["l", "s"]
    assert fused[0].score == pytest.approx(3 / 61)


def test_rrf_counts_a_duplicate_only_at_its_best_rank() -> None:
    fused = reciprocal_rank_fusion(legs([hit("a"), hit("b"), hit("a")], []), k=60)

    by_id = {h.chunk_id: h for h in fused}
    assert by_id["a"].score == pytest.approx(1 / 61)
    assert by_id["b"].ranks[SEMANTIC_LEG] == 2


def test_rrf_rejects_negative_k_weight_and_limit() -> None:
    ranked = legs([hit("a")], [])

    with pytest.raises(ValueError, match="k must be"):
        reciprocal_rank_fusion(ranked, k=-1)
    with pytest.raises(ValueError, match="weight"):
        reciprocal_rank_fusion(ranked, weights={SEMANTIC_LEG: -0.5}, k=60)
    with pytest.raises(ValueError, match="limit"):
        reciprocal_rank_fusion(ranked, limit=-1, k=60)


# --- invariants shared by every fusion -----------------------------------------------------------

ALL_FUSIONS = [
    pytest.param(functools.partial(reciprocal_rank_fusion, k=60), id="rrf"),
    pytest.param(weighted_score_fusion, id="weighted"),
    pytest.param(zscore_fusion, id="zscore"),
]


@pytest.mark.parametrize("fusion", ALL_FUSIONS)
def test_fusion_does_not_mutate_its_input(fusion) -> None:
    ranked = legs([hit("a", 0.9), hit("b", 0.8)], [hit("b", 5.0), hit("c", 1.0)])
    before = copy.deepcopy(ranked)

    fusion(ranked)

    assert ranked == before


@pytest.mark.parametrize("fusion", ALL_FUSIONS)
def test_fusion_keeps_chunks_found_by_one_leg_only(fusion) -> None:
    ranked = legs([hit("a", 0.9), hit("b", 0.5)], [hit("c", 4.0), hit("d", 2.0)])

    fused = fusion(ranked)

    assert sorted(ids(fused)) == ["a", "b", "c", "d"]


@pytest.mark.parametrize("fusion", ALL_FUSIONS)
def test_fusion_score_is_the_sum_of_contributions_and_order_is_best_first(fusion) -> None:
    ranked = legs([hit("a", 0.9), hit("b", 0.7), hit("c", 0.2)], [hit("c", 9.0), hit("d", 4.0), hit("a", 1.0)])

    fused = fusion(ranked)

    for fused_hit in fused:
        assert fused_hit.score == pytest.approx(sum(fused_hit.contributions.values()))
    assert [h.score for h in fused] == sorted((h.score for h in fused), reverse=True)


@pytest.mark.parametrize("fusion", ALL_FUSIONS)
def test_fusion_is_deterministic_whatever_the_leg_order(fusion) -> None:
    semantic = [hit("b", 0.9), hit("a", 0.8)]
    lexical = [hit("a", 2.0), hit("b", 1.0)]

    forward = fusion({SEMANTIC_LEG: semantic, LEXICAL_LEG: lexical})
    backward = fusion({LEXICAL_LEG: lexical, SEMANTIC_LEG: semantic})

    assert ids(forward) == ids(backward)
    assert [h.score for h in forward] == [h.score for h in backward]


# --- weighted (min-max) ----------------------------------------------------------------------------


def test_min_max_maps_to_unit_interval() -> None:
    assert min_max_normalize([8.0, 6.0, 4.0]) == [1.0, 0.5, 0.0]
    assert min_max_normalize([]) == []


def test_min_max_of_identical_scores_is_one_half() -> None:
    assert min_max_normalize([3.0, 3.0, 3.0]) == [0.5, 0.5, 0.5]
    assert min_max_normalize([7.0]) == [0.5]


def test_weighted_fusion_uses_point_six_point_four_by_default() -> None:
    ranked = legs([hit("a", 0.9), hit("b", 0.5)], [hit("b", 10.0), hit("a", 2.0)])

    fused = {h.chunk_id: h for h in weighted_score_fusion(ranked, weights=REFERENCE_WEIGHTS)}

    assert fused["a"].score == pytest.approx(0.6 * 1.0 + 0.4 * 0.0)
    assert fused["b"].score == pytest.approx(0.6 * 0.0 + 0.4 * 1.0)
    assert fused["a"].contributions[SEMANTIC_LEG] == pytest.approx(0.6)


def test_weighted_fusion_chunk_missing_from_a_leg_gets_nothing_from_it() -> None:
    ranked = legs([hit("a", 0.9), hit("b", 0.3)], [hit("c", 5.0), hit("d", 1.0)])

    fused = {h.chunk_id: h for h in weighted_score_fusion(ranked, weights=REFERENCE_WEIGHTS)}

    assert fused["a"].score == pytest.approx(0.6)
    assert fused["c"].score == pytest.approx(0.4)
    assert LEXICAL_LEG not in fused["a"].contributions


def test_weighted_fusion_identical_scores_rule_applies_per_leg() -> None:
    ranked = legs([hit("a", 0.7), hit("b", 0.7)], [hit("a", 3.0)])

    fused = {h.chunk_id: h for h in weighted_score_fusion(ranked, weights=REFERENCE_WEIGHTS)}

    assert fused["a"].score == pytest.approx(0.6 * 0.5 + 0.4 * 0.5)
    assert fused["b"].score == pytest.approx(0.6 * 0.5)


def test_weighted_fusion_honours_given_weights() -> None:
    ranked = legs([hit("a", 0.9), hit("b", 0.5)], [hit("b", 10.0), hit("a", 2.0)])

    fused = weighted_score_fusion(ranked, weights={SEMANTIC_LEG: 0.2, LEXICAL_LEG: 0.8})

    assert ids(fused) == ["b", "a"]
    assert fused[0].score == pytest.approx(0.8)


# --- z-score -------------------------------------------------------------------------------------


def test_zscore_standardises_each_leg_and_floors_missing_chunks() -> None:
    semantic = [hit("a", 0.9), hit("b", 0.6), hit("c", 0.3)]
    lexical = [hit("c", 12.0), hit("d", 6.0)]
    sem_scores, lex_scores = [0.9, 0.6, 0.3], [12.0, 6.0]
    sem_mean, sem_sd = statistics.fmean(sem_scores), statistics.pstdev(sem_scores)
    lex_mean, lex_sd = statistics.fmean(lex_scores), statistics.pstdev(lex_scores)
    z_sem = {cid: (s - sem_mean) / sem_sd for cid, s in zip("abc", sem_scores, strict=True)}
    z_lex = {cid: (s - lex_mean) / lex_sd for cid, s in zip("cd", lex_scores, strict=True)}

    fused = {h.chunk_id: h for h in zscore_fusion(legs(semantic, lexical), weights=REFERENCE_WEIGHTS)}

    lex_floor, sem_floor = min(z_lex.values()), min(z_sem.values())
    assert fused["a"].score == pytest.approx(0.6 * z_sem["a"] + 0.4 * lex_floor)
    assert fused["c"].score == pytest.approx(0.6 * z_sem["c"] + 0.4 * z_lex["c"])
    assert fused["d"].score == pytest.approx(0.6 * sem_floor + 0.4 * z_lex["d"])
    assert fused["a"].contributions[LEXICAL_LEG] == pytest.approx(0.4 * lex_floor)
    assert LEXICAL_LEG not in fused["a"].ranks


def test_zscore_of_identical_scores_is_what_a_legs_best_hit_gets() -> None:
    fused = zscore_fusion(legs([hit("a", 0.5), hit("b", 0.5)], []), weights=REFERENCE_WEIGHTS)

    assert [h.score for h in fused] == [0.6 * IDENTICAL_SCORES_Z] * 2
    assert ids(fused) == ["a", "b"]


def test_zscore_leg_with_one_hit_still_ranks_it_above_what_it_missed() -> None:
    # The lexical leg found only "z"; weighed alone, it must decide the order, not the chunk ids.
    semantic = [hit("a", 0.1), hit("b", 0.05), hit("z", 0.5)]
    ranked = legs(semantic, [hit("z", 3.9)])

    lexical_alone = zscore_fusion(ranked, weights={SEMANTIC_LEG: 0.0, LEXICAL_LEG: 1.0})
    by_id = {h.chunk_id: h for h in zscore_fusion(ranked, weights={SEMANTIC_LEG: 1.0, LEXICAL_LEG: 1.0})}

    assert ids(lexical_alone)[0] == "z"
    assert lexical_alone[0].score - lexical_alone[1].score == pytest.approx(IDENTICAL_SCORES_Z + 1.0)
    assert by_id["z"].contributions[LEXICAL_LEG] == IDENTICAL_SCORES_Z
    assert by_id["a"].contributions[LEXICAL_LEG] == by_id["b"].contributions[LEXICAL_LEG] == -1.0


def test_the_only_chunk_holding_a_rare_word_leads_semantic_hits_that_merely_spread() -> None:
    # "zqmarkerux" is in one chunk of a long document: the lexical leg finds it alone, the semantic leg
    # returns 50 chunks of no relevance whose z-scores spread as widely as good ones would; "m" it ranks last.
    semantic = [hit(f"s{n:02}", 0.30 - n * 0.004) for n in range(50)] + [hit("m", 0.05)]
    ranked = legs(semantic, [hit("m", 14.2)])

    fused = zscore_fusion(ranked, weights=DEFAULT_WEIGHTS)

    assert ids(fused)[0] == "m"


@pytest.mark.parametrize("fusion", ["zscore", "weighted"])
def test_a_leg_weighed_alone_puts_its_lowest_hit_before_the_chunks_it_missed(fusion: str) -> None:
    # "kiwi" once in "z" (the lexical leg's lowest hit) against chunks the lexical leg missed: with the
    # semantic leg weighed 0 all of them score alike, and chunk ids put "z" after every miss.
    semantic = [hit("a1", 0.3), hit("a2", 0.2), hit("m1", 0.5), hit("z", 0.1)]
    lexical = [hit("m1", 6.0), hit("m2", 5.0), hit("z", 1.0)]
    fuse_with = zscore_fusion if fusion == "zscore" else weighted_score_fusion

    fused = fuse_with(legs(semantic, lexical), weights={SEMANTIC_LEG: 0.0, LEXICAL_LEG: 1.0})

    assert ids(fused)[:3] == ["m1", "m2", "z"]
    assert ids(fused)[3:] == ["a1", "a2"]


def test_zscore_leg_of_ties_lifts_its_hits_alike_over_the_ones_it_missed() -> None:
    ranked = legs([hit("a", 0.9), hit("b", 0.8), hit("c", 0.7)], [hit("b", 2.0), hit("c", 2.0)])

    fused = zscore_fusion(ranked, weights={SEMANTIC_LEG: 0.0, LEXICAL_LEG: 1.0})

    assert ids(fused) == ["b", "c", "a"]
    assert fused[0].score == fused[1].score == fused[2].score + IDENTICAL_SCORES_Z + 1.0


def test_zscore_is_not_fooled_by_score_scale() -> None:
    # Same shape of distribution, lexical on a 100x scale: the scale must not decide the winner.
    ranked = legs([hit("s1", 0.9), hit("s2", 0.1)], [hit("l1", 90.0), hit("l2", 10.0)])

    fused = zscore_fusion(ranked, weights={SEMANTIC_LEG: 1.0, LEXICAL_LEG: 1.0})

    by_id = {h.chunk_id: h for h in fused}
    assert by_id["s1"].score == pytest.approx(by_id["l1"].score)


# --- dispatch, single leg, cascade ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "expected_top_score"),
    [
        (FusionMethod.RRF, 2 / 61),
        (FusionMethod.WEIGHTED, 2.0),  # no weights given: both legs weigh 1 (NEUTRAL_WEIGHT)
        (FusionMethod.ZSCORE, 2.0),
    ],
)
def test_fuse_dispatches_on_the_method(method: FusionMethod, expected_top_score: float) -> None:
    ranked = legs([hit("a", 0.9), hit("b", 0.1)], [hit("a", 9.0), hit("b", 1.0)])

    fused = fuse(ranked, FusionSettings(method=method, rrf_k=60, weights={}), limit=1)

    assert ids(fused) == ["a"]
    assert fused[0].score == pytest.approx(expected_top_score)


def test_fuse_passes_rrf_k_and_weights() -> None:
    ranked = legs([hit("a")], [hit("b")])

    fused = fuse(ranked, FusionSettings(method=FusionMethod.RRF, rrf_k=10, weights={LEXICAL_LEG: 2.0}))

    assert ids(fused) == ["b", "a"]
    assert fused[0].score == pytest.approx(2 / 11)


def test_single_leg_ranking_keeps_the_legs_order_and_score() -> None:
    fused = rank_single_leg([hit("a", 7.5), hit("b", 3.0), hit("a", 1.0)], leg=LEXICAL_LEG)

    assert ids(fused) == ["a", "b"]
    assert fused[0].score == 7.5
    assert dict(fused[1].ranks) == {LEXICAL_LEG: 2}


def test_cascade_ranking_orders_candidates_by_similarity_and_reports_both_ranks() -> None:
    lexical = [hit("a", 9.0), hit("b", 5.0), hit("c", 1.0)]
    semantic = [hit("c", 0.9), hit("a", 0.4), hit("z", 0.99)]  # z was never a candidate

    fused = cascade_ranking(semantic, lexical)

    assert ids(fused) == ["c", "a"]
    assert fused[0].score == 0.9
    assert dict(fused[0].ranks) == {SEMANTIC_LEG: 1, LEXICAL_LEG: 3}
    assert dict(fused[0].leg_scores) == {SEMANTIC_LEG: 0.9, LEXICAL_LEG: 1.0}


# --- post-processing -----------------------------------------------------------------------------


def test_collapse_keeps_the_best_hits_of_each_document() -> None:
    hits = [
        hit("a1", document_id="A"),
        hit("a2", document_id="A"),
        hit("b1", document_id="B"),
        hit("a3", document_id="A"),
    ]
    fused = rank_single_leg(hits, leg=SEMANTIC_LEG)

    assert ids(collapse_per_document(fused, 1)) == ["a1", "b1"]
    assert ids(collapse_per_document(fused, 2)) == ["a1", "a2", "b1"]
    assert ids(returned_hits(fused, limit=2, max_per_document=1)) == ["a1", "b1"]  # collapsed before it counts
    assert ids(returned_hits(fused, limit=0)) == []
    with pytest.raises(ValueError, match="max_per_document"):
        collapse_per_document(fused, 0)
    with pytest.raises(ValueError, match="limit"):
        returned_hits(fused, limit=-1)


def test_min_score_drops_hits_below_the_floor_inclusive() -> None:
    fused = rank_single_leg([hit("a", 0.9), hit("b", 0.5), hit("c", 0.1)], leg=SEMANTIC_LEG)

    assert ids(returned_hits(fused, limit=10, min_score=0.5)) == ["a", "b"]


def test_returned_hits_read_no_further_than_the_limit_needs() -> None:
    fused = rank_single_leg([hit(name, 1.0 - index / 10) for index, name in enumerate("abcdef")], leg=SEMANTIC_LEG)
    read: list[str] = []

    def reading(hits: list[FusedHit]) -> Iterator[FusedHit]:
        for fused_hit in hits:
            read.append(fused_hit.chunk_id)
            yield fused_hit

    kept = returned_hits(reading(fused), limit=2)
    floored = returned_hits(reading(fused), limit=10, min_score=0.75)

    assert ids(kept) == ["a", "b"]
    assert ids(floored) == ["a", "b", "c"]
    assert read == ["a", "b", "a", "b", "c", "d"]  # the floor ends at the first hit below it


# --- readable relevance (final_score) --------------------------------------------------------------

DEFAULT_WEIGHTS = {SEMANTIC_LEG: 0.45, LEXICAL_LEG: 0.55}
BOTH_LEGS = (SEMANTIC_LEG, LEXICAL_LEG)


def readable(ranked: dict[str, list[ScoredHit]], **options: object) -> list:
    fused = zscore_fusion(ranked, weights=DEFAULT_WEIGHTS)
    return list(readable_relevance(fused, legs=tuple(ranked), weights=DEFAULT_WEIGHTS, **options))


def test_a_single_hit_matching_on_both_legs_reads_as_relevant_not_zero() -> None:
    (only,) = readable(legs([hit("a", 0.82)], [hit("a", 12.0)]))

    assert only.score == IDENTICAL_SCORES_Z  # no z-score for a lone hit: why it cannot be the readable score
    expected = 0.45 * 0.82 + 0.55 * 12.0 / (12.0 + BM25_HALF_RELEVANCE)
    assert only.relevance == pytest.approx(expected)
    assert only.relevance_parts == pytest.approx({SEMANTIC_LEG: 0.82, LEXICAL_LEG: 12.0 / (12.0 + BM25_HALF_RELEVANCE)})


def test_all_tied_hits_get_one_equal_bounded_relevance() -> None:
    tied = readable(legs([hit(name, 0.6) for name in "abc"], [hit(name, 4.0) for name in "abc"]))

    assert [fused.score for fused in tied] == [IDENTICAL_SCORES_Z] * 3
    assert len({fused.relevance for fused in tied}) == 1
    assert 0.0 < tied[0].relevance < 1.0


def test_the_same_match_reads_the_same_in_any_query() -> None:
    alone = readable(legs([hit("a", 0.7)], [hit("a", 8.0)]))[0]
    among_weaker = readable(legs([hit("a", 0.7), hit("b", 0.2)], [hit("a", 8.0), hit("b", 1.0)]))[0]

    assert alone.chunk_id == among_weaker.chunk_id == "a"
    assert alone.relevance == pytest.approx(among_weaker.relevance)
    assert alone.score != among_weaker.score  # the z-score depends on the company the hit keeps


def test_relevance_is_bounded_and_never_rises_down_the_ranking() -> None:
    semantic = [hit("a", 1.3), hit("b", 0.1), hit("c", 0.95), hit("d", -0.4)]
    lexical = [hit("b", 40.0), hit("c", 0.5), hit("e", 3.0)]

    fused = readable(legs(semantic, lexical))
    relevances = [fused_hit.relevance for fused_hit in fused]

    assert all(0.0 <= value <= 1.0 for value in relevances)
    assert relevances == sorted(relevances, reverse=True)
    assert [fused_hit.chunk_id for fused_hit in fused] == [
        fused_hit.chunk_id for fused_hit in zscore_fusion(legs(semantic, lexical), weights=DEFAULT_WEIGHTS)
    ]


def test_a_lexical_match_fused_below_a_hit_of_no_relevance_reads_zero_and_keeps_its_own_mean() -> None:
    # Seen on a real server (notes fixture, "taken any their"): the lexical leg's last hit gets its floor, as
    # a miss does, so fusion ranks it by its cosine alone, below semantic-only hits; one of those with a
    # cosine below 0 reads 0, and the cap carries that 0 down to the lexical match.
    semantic = [hit("a", 0.46), hit("z", 0.05), hit("c", -0.02), hit("b", -0.03)]
    lexical = [hit("a", 3.4), hit("b", 3.2)]

    fused = readable(legs(semantic, lexical))

    assert ids(fused) == ["a", "z", "c", "b"]
    capped = fused[3]
    assert fused[2].relevance == fused[2].relevance_mean == 0.0  # no lexical match, a negative cosine
    assert capped.relevance == 0.0
    assert capped.relevance_mean == pytest.approx(0.55 * 3.2 / (3.2 + BM25_HALF_RELEVANCE))
    assert capped.relevance_parts == pytest.approx({SEMANTIC_LEG: 0.0, LEXICAL_LEG: 3.2 / (3.2 + BM25_HALF_RELEVANCE)})


def test_relevance_is_the_lowest_mean_of_the_hit_and_every_hit_above_it() -> None:
    semantic = [hit("a", 1.3), hit("b", 0.1), hit("c", 0.95), hit("d", -0.4)]
    lexical = [hit("b", 40.0), hit("c", 0.5), hit("e", 3.0)]

    fused = readable(legs(semantic, lexical))

    for position, fused_hit in enumerate(fused):
        parts = fused_hit.relevance_parts
        assert fused_hit.relevance_mean == pytest.approx(0.45 * parts[SEMANTIC_LEG] + 0.55 * parts[LEXICAL_LEG])
        assert fused_hit.relevance == min(above.relevance_mean for above in fused[: position + 1])


def test_a_leg_that_did_not_answer_is_left_out_of_the_mean() -> None:
    (lexical_only,) = readable_relevance(
        rank_single_leg([hit("a", BM25_HALF_RELEVANCE)], leg=LEXICAL_LEG), legs=(LEXICAL_LEG,)
    )

    assert lexical_only.relevance == pytest.approx(0.5)  # BM25 at the half point, no semantic zero dragging it
    assert lexical_only.relevance_parts == {LEXICAL_LEG: pytest.approx(0.5)}


def test_legs_that_answered_all_weighing_zero_count_equally() -> None:
    # `strategy: lexical` with `weights: {"semantic": 1}`: the lexical leg is all that was searched.
    single = rank_single_leg([hit("a", BM25_HALF_RELEVANCE)], leg=LEXICAL_LEG)
    weighed_zero = {SEMANTIC_LEG: 1.0, LEXICAL_LEG: 0.0}

    (read,) = readable_relevance(single, legs=(LEXICAL_LEG,), weights=weighed_zero)

    assert read.relevance == pytest.approx(0.5)


def test_min_score_thresholds_the_readable_relevance() -> None:
    fused = readable(legs([hit("a", 0.9), hit("b", 0.3)], [hit("a", 80.0)]))

    kept = returned_hits(fused, limit=10, min_score=0.5)

    assert [fused_hit.chunk_id for fused_hit in kept] == ["a"]
    assert kept[0].readable_score == kept[0].relevance


def test_the_bm25_half_point_grows_with_the_terms_bm25_sums_over() -> None:
    nine = LexicalQuery(text="a b c d e f g h i")
    assert BM25_HALF_TERMS == 9
    assert bm25_half_for(nine) == pytest.approx(BM25_HALF_RELEVANCE)
    # Each word once unless a passage weighs repeats; phrase words count; excluded terms score nothing.
    assert bm25_half_for(LexicalQuery(text="tls tls tls")) == bm25_half_for(LexicalQuery(text="tls"))
    assert bm25_half_for(LexicalQuery(text="tls tls tls", weigh_repeats=True)) == bm25_half_for(
        LexicalQuery(text="tls cert renew")
    )
    assert bm25_half_for(LexicalQuery(text="tls", phrases=("cert manager",))) == bm25_half_for(
        LexicalQuery(text="tls cert renew", excluded_terms=("nginx",))
    )
    assert bm25_half_for(LexicalQuery(text="")) == bm25_half_for(LexicalQuery(text="tls")) > 0
    halves = [bm25_half_for(LexicalQuery(text=" ".join(f"w{n}" for n in range(terms)))) for terms in (1, 3, 9, 30, 300)]
    assert halves == sorted(halves)
    assert len(set(halves)) == len(halves)


def test_readable_relevance_rejects_a_non_positive_bm25_half() -> None:
    with pytest.raises(ValueError, match="bm25_half"):
        readable_relevance([], legs=BOTH_LEGS, bm25_half=0.0)


def test_readable_relevance_keeps_every_other_field_of_a_hit() -> None:
    (fused,) = zscore_fusion(legs([hit("a", 0.7)], [hit("a", 8.0)]), weights=DEFAULT_WEIGHTS)
    reranked = dataclasses.replace(fused, rerank_score=0.25)

    (calibrated,) = readable_relevance([reranked], legs=BOTH_LEGS)

    expected = dataclasses.replace(
        reranked,
        relevance=calibrated.relevance,
        relevance_parts=calibrated.relevance_parts,
        relevance_mean=calibrated.relevance_mean,
    )  # every field, including any added later, must survive calibration
    assert calibrated == expected
    assert calibrated.relevance is not None


def test_cascading_breaks_ties_on_chunk_id_whatever_order_the_vector_read_gave() -> None:
    lexical = [hit("a", 3.0), hit("b", 2.0), hit("c", 1.0)]

    forward = cascade_ranking([hit("a", 0.5), hit("b", 0.5), hit("c", 0.9)], lexical)
    backward = cascade_ranking([hit("c", 0.9), hit("b", 0.5), hit("a", 0.5)], lexical)

    assert ids(forward) == ids(backward) == ["c", "a", "b"]


def test_one_leg_alone_breaks_ties_on_chunk_id_whatever_order_the_engine_gave() -> None:
    forward = rank_single_leg([hit("a", 0.5), hit("b", 0.5), hit("c", 0.9)], leg=SEMANTIC_LEG)
    backward = rank_single_leg([hit("c", 0.9), hit("b", 0.5), hit("a", 0.5)], leg=SEMANTIC_LEG)

    assert ids(forward) == ids(backward) == ["c", "a", "b"]
    assert [h.ranks[SEMANTIC_LEG] for h in backward] == [1, 2, 3]
