from __future__ import annotations

import math

import pytest

from app.evaluation.metrics import mean_scores, mean_scores_by, paired_bootstrap, per_query_scores

QRELS = {"q1": {"a": 1}, "q2": {"b": 1, "c": 1}}


def test_reciprocal_rank_and_recall_from_ir_measures() -> None:
    run = {"q1": {"x": 3.0, "a": 2.0}, "q2": {"b": 3.0, "y": 2.0, "z": 1.0}}

    scores = per_query_scores(QRELS, run, ["MRR@10", "Recall@10", "P@5"])

    assert scores["MRR@10"] == {"q1": 0.5, "q2": 1.0}
    assert scores["Recall@10"] == {"q1": 1.0, "q2": 0.5}
    assert scores["P@5"]["q2"] == pytest.approx(1 / 5)


def test_ndcg_matches_the_hand_computed_value() -> None:
    run = {"q1": {"x": 2.0, "a": 1.0}}

    scores = per_query_scores({"q1": {"a": 1}}, run, ["nDCG@10"])

    assert scores["nDCG@10"]["q1"] == pytest.approx(1 / math.log2(3))


def test_a_query_without_hits_counts_as_zero() -> None:
    run = {"q1": {"a": 1.0}}

    means = mean_scores(per_query_scores(QRELS, run, ["Recall@10"]))

    assert means["Recall@10"] == pytest.approx(0.5)


def test_means_per_category_leave_out_uncategorised_queries() -> None:
    per_query = {"Recall@10": {"q1": 1.0, "q2": 0.5, "q3": 0.0}}

    by_category = mean_scores_by(per_query, {"q1": "1", "q2": "1", "q3": None})

    assert by_category == {"1": {"Recall@10": 0.75}}


def test_paired_bootstrap_of_identical_runs_is_zero() -> None:
    scores = {"q1": 0.2, "q2": 0.9, "q3": 0.5}

    assert paired_bootstrap(scores, dict(scores), samples=200) == (0.0, 0.0, 0.0)


def test_paired_bootstrap_brackets_the_mean_difference_and_pairs_by_query() -> None:
    baseline = {f"q{n}": n / 100 for n in range(100)}
    candidate = {query_id: score + (0.1 if int(query_id[1:]) % 2 else 0.0) for query_id, score in baseline.items()}
    candidate["only-here"] = 1.0  # not in the baseline: ignored

    mean, low, high = paired_bootstrap(baseline, candidate, samples=2000)

    assert mean == pytest.approx(0.05)
    assert 0.0 < low < mean < high < 0.1
    assert paired_bootstrap(baseline, candidate, samples=2000) == (mean, low, high)  # seeded


def test_paired_bootstrap_needs_shared_queries() -> None:
    with pytest.raises(ValueError, match="share no query"):
        paired_bootstrap({"a": 1.0}, {"b": 1.0})
