"""Retrieval metrics, computed by ir-measures (pytrec_eval underneath): nothing is hand-rolled here.

Reported names map to ir-measures measures: `nDCG@10` -> nDCG@10, `MRR@10` -> RR@10, `Recall@k` -> R@k,
`P@5` -> P@5. Averages run over every judged query: a query the run has no hit for counts as 0 (plain
pytrec_eval would skip it and inflate the mean).
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from typing import TYPE_CHECKING, Final

import ir_measures

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

BEIR_METRICS: Final = ("nDCG@10", "MRR@10", "Recall@10", "Recall@100", "P@5")
"""What every data set reports (BEIR's headline metrics)."""

CONVERSATIONAL_EXTRA_METRICS: Final = ("Recall@5", "Recall@25", "Recall@50")
"""LoCoMo reports evidence recall at 5/10/25/50 as well."""

_IR_MEASURES_NAMES: Final = {"MRR": "RR", "Recall": "R"}


def to_measure(name: str) -> ir_measures.Measure:
    """The ir-measures measure a reported name stands for (`MRR@10` -> `RR@10`)."""
    family, _, cutoff = name.partition("@")
    return ir_measures.parse_measure(f"{_IR_MEASURES_NAMES.get(family, family)}@{cutoff}" if cutoff else family)


def per_query_scores(
    qrels: Mapping[str, Mapping[str, int]],
    run: Mapping[str, Mapping[str, float]],
    metric_names: Sequence[str],
) -> dict[str, dict[str, float]]:
    """Metric name -> query id -> value, for every query in `qrels` (0.0 where the run has no hit)."""
    measures = {to_measure(name): name for name in metric_names}
    scores: dict[str, dict[str, float]] = {name: dict.fromkeys(qrels, 0.0) for name in metric_names}
    judged_run = {query_id: dict(hits) for query_id, hits in run.items() if query_id in qrels and hits}
    if judged_run:
        qrels_copy = {query_id: dict(judged) for query_id, judged in qrels.items()}
        for metric in ir_measures.iter_calc(list(measures), qrels_copy, judged_run):
            scores[measures[metric.measure]][metric.query_id] = float(metric.value)
    return scores


def mean_scores(
    per_query: Mapping[str, Mapping[str, float]], query_ids: Iterable[str] | None = None
) -> dict[str, float]:
    """Mean of each metric over `query_ids` (all of them when None); an empty selection gives 0.0."""
    means: dict[str, float] = {}
    for name, values in per_query.items():
        selected = list(values.values()) if query_ids is None else [values[query_id] for query_id in query_ids]
        means[name] = sum(selected) / len(selected) if selected else 0.0
    return means


def mean_scores_by(
    per_query: Mapping[str, Mapping[str, float]], key_of: Mapping[str, str | None]
) -> dict[str, dict[str, float]]:
    """Means per key (e.g. question category): key -> metric -> mean. Queries whose key is None are left out."""
    members: dict[str, list[str]] = defaultdict(list)
    for query_id, key in key_of.items():
        if key is not None:
            members[key].append(query_id)
    return {key: mean_scores(per_query, query_ids) for key, query_ids in sorted(members.items())}


BOOTSTRAP_SAMPLES: Final = 10_000


def paired_bootstrap(
    baseline: Mapping[str, float],
    candidate: Mapping[str, float],
    *,
    samples: int = BOOTSTRAP_SAMPLES,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float, float]:
    """(mean difference, low, high) of `candidate - baseline` over the queries both score.

    The interval is the percentile interval of resampling queries with replacement; seeded, so a report
    is reproducible.

    Raises `ValueError` when the two share no query or `confidence` is not in (0, 1).
    """
    if not 0 < confidence < 1:
        msg = f"confidence must be in (0, 1), got {confidence}"
        raise ValueError(msg)
    shared = sorted(set(baseline) & set(candidate))
    if not shared:
        msg = "the two runs share no query"
        raise ValueError(msg)
    differences = [candidate[query_id] - baseline[query_id] for query_id in shared]
    generator = random.Random(seed)  # noqa: S311 - resampling, not cryptography
    count = len(differences)
    means = sorted(math.fsum(generator.choices(differences, k=count)) / count for _ in range(samples))
    tail = (1 - confidence) / 2
    low = means[min(samples - 1, int(tail * samples))]
    high = means[min(samples - 1, int((1 - tail) * samples))]
    return math.fsum(differences) / count, low, high
