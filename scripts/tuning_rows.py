"""One row of a re-ranking sweep: a variant's means, its Recall@10 per category, and its paired difference.

Shared by `tune_awareness.py`, `tune_hops.py` and `tune_prf.py`, which score their variants the same way against the
unchanged ranking (the first variant scored).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from app.evaluation.metrics import mean_scores, mean_scores_by, paired_bootstrap

if TYPE_CHECKING:
    import argparse
    from collections.abc import Mapping


def variant_row(
    label: str,
    per_query: dict[str, dict[str, float]],
    baseline: dict[str, dict[str, float]],
    categories: Mapping[str, str | None],
) -> dict[str, object]:
    """`label`'s Recall@10 and nDCG@10, by category, and minus `baseline` [95 % interval]; metric -> query -> score."""
    difference, low, high = paired_bootstrap(baseline["Recall@10"], per_query["Recall@10"])
    by_category = {
        category: round(scores["Recall@10"], 4) for category, scores in mean_scores_by(per_query, categories).items()
    }
    overall = mean_scores(per_query)
    return {
        "variant": label,
        "Recall@10": round(overall["Recall@10"], 4),
        "nDCG@10": round(overall["nDCG@10"], 4),
        "Recall@10 by category": by_category,
        "Recall@10 minus default": [round(difference, 4), round(low, 4), round(high, 4)],
    }


def write_rows(arguments: argparse.Namespace, rows: list[dict[str, object]]) -> None:
    """The sweep's rows as JSON at `--output` (nothing without it), with the data set, split and groups."""
    if arguments.output:
        arguments.output.parent.mkdir(parents=True, exist_ok=True)
        document = {
            "dataset": arguments.dataset.name,
            "split": arguments.split,
            "groups": arguments.groups,
            "rows": rows,
        }
        arguments.output.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
