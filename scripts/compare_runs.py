"""Paired bootstrap between two `poimen eval` runs of one data set (their `runs/<name>.trec` files).

Prints, per metric, both means and `second - first` with its 95 % interval over queries: a difference
whose interval holds 0 is not shown to be real. Queries a run has no line for count as 0 (as in the report).

    python scripts/compare_runs.py --qrels ../shared/datasets/scifact/qrels/test.tsv \
        --first before/runs/routed-zscore.trec --second after/runs/routed-zscore.trec
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from app.evaluation.datasets import read_qrels
from app.evaluation.metrics import paired_bootstrap, per_query_scores


def read_trec_run(path: Path) -> dict[str, dict[str, float]]:
    """`query Q0 document rank score tag` lines as query -> document -> score."""
    run: dict[str, dict[str, float]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        fields = line.split()
        if len(fields) >= 5:
            run.setdefault(fields[0], {})[fields[2]] = float(fields[4])
    return run


def compare(qrels_path: Path, first: Path, second: Path, metrics: list[str]) -> dict[str, dict[str, float]]:
    qrels = {query: judged for query, judged in read_qrels(qrels_path).items() if any(v > 0 for v in judged.values())}
    before = per_query_scores(qrels, read_trec_run(first), metrics)
    after = per_query_scores(qrels, read_trec_run(second), metrics)
    report: dict[str, dict[str, float]] = {}
    for metric in metrics:
        mean, low, high = paired_bootstrap(before[metric], after[metric])
        report[metric] = {
            "first": round(sum(before[metric].values()) / len(qrels), 4),
            "second": round(sum(after[metric].values()) / len(qrels), 4),
            "difference": round(mean, 4),
            "low": round(low, 4),
            "high": round(high, 4),
            "queries": len(qrels),
        }
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--qrels", type=Path, required=True)
    parser.add_argument("--first", type=Path, required=True, help="the baseline run (.trec)")
    parser.add_argument("--second", type=Path, required=True, help="the candidate run (.trec)")
    parser.add_argument("--metrics", default="nDCG@10,Recall@10,Recall@100")
    arguments = parser.parse_args()
    report = compare(arguments.qrels, arguments.first, arguments.second, arguments.metrics.split(","))
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
