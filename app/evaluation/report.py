"""Evaluation reports: `results.json`, a markdown table and a PNG comparing strategies x fusions. Writes files.

`results.json` is shaped `{"dataset", "split", "default", "runs": {name: {metric: value, ...,
"latency_ms": {"p50", "p95", "mean"}}}}`, plus `primary_metric`, `configuration` (the settings the
runs used) and, for conversational sets, `by_category`, `by_conversation` and `conversation_queries`.
Values are rounded to 4 decimals (latency to 3).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Final

import matplotlib as mpl

mpl.use("Agg")  # files only, never a display

from matplotlib import pyplot as plt

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from pathlib import Path

    from app.evaluation.datasets import EvalDataset
    from app.evaluation.runner import RunResult

RESULTS_FILE: Final = "results.json"
TABLE_FILE: Final = "results.md"
PLOT_FILE: Final = "results.png"
RUNS_SUBDIR: Final = "runs"
TREC_RUN_SUFFIX: Final = ".trec"
METRIC_DECIMALS: Final = 4
LATENCY_DECIMALS: Final = 3
_STRATEGY_ORDER: Final = ("semantic", "lexical", "cascading", "hybrid", "routed")


def primary_metric(dataset: EvalDataset) -> str:
    """The headline metric: Recall@10 for conversational memory (the LoCoMo paper's), else nDCG@10 (BEIR's)."""
    return "Recall@10" if dataset.conversational else "nDCG@10"


def results_document(
    dataset: EvalDataset,
    results: Sequence[RunResult],
    *,
    default_run: str,
    configuration: Mapping[str, object],
) -> dict[str, object]:
    """The `results.json` content."""
    runs = {
        result.spec.name: {
            **{name: round(value, METRIC_DECIMALS) for name, value in result.metrics.items()},
            "latency_ms": {name: round(value, LATENCY_DECIMALS) for name, value in result.latency_ms.items()},
            **({"failed_queries": dict(result.failed)} if result.failed else {}),
        }
        for result in results
    }
    document: dict[str, object] = {
        "dataset": dataset.name,
        "split": dataset.split,
        "default": default_run,
        "primary_metric": primary_metric(dataset),
        "queries": len(dataset.queries),
        "runs": runs,
        "configuration": dict(configuration),
    }
    by_category = _rounded_breakdowns({result.spec.name: result.by_category for result in results})
    if by_category:
        document["by_category"] = by_category
    by_group = _rounded_breakdowns({result.spec.name: result.by_group for result in results})
    if by_group:
        document["by_conversation"] = by_group
        counts: dict[str, int] = {}
        for query in dataset.queries:
            if query.group is not None:
                counts[query.group] = counts.get(query.group, 0) + 1
        document["conversation_queries"] = dict(sorted(counts.items()))
    return document


def markdown_table(document: Mapping[str, object]) -> str:
    """Runs as a markdown table (best primary metric first), then per-category tables when present."""
    runs: Mapping[str, Mapping[str, object]] = document["runs"]  # type: ignore[assignment]
    primary = str(document["primary_metric"])
    default = str(document["default"])
    # The metrics are a run's numbers: `latency_ms` and `failed_queries` (a run with refused queries) are not.
    metrics = (
        [name for name, value in next(iter(runs.values())).items() if isinstance(value, int | float)] if runs else []
    )
    lines = [
        f"# {document['dataset']} ({document['split']}, {document['queries']} queries)",
        "",
        f"Default configuration: **{default}**. Sorted by {primary}. Latency is end to end per query (ms).",
        "",
        "| run | " + " | ".join(metrics) + " | p50 ms | p95 ms | mean ms |",
        "|---|" + "---:|" * (len(metrics) + 3),
    ]
    ordered = sorted(runs.items(), key=lambda item: (-float(item[1][primary]), item[0]))  # type: ignore[arg-type]
    for name, values in ordered:
        latency: Mapping[str, float] = values["latency_ms"]  # type: ignore[assignment]
        label = f"**{name}** (default)" if name == default else name
        cells = [f"{float(values[metric]):.4f}" for metric in metrics]  # type: ignore[arg-type]
        cells += [f"{latency['p50']:.1f}", f"{latency['p95']:.1f}", f"{latency['mean']:.1f}"]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    failed = [
        f"{name} {len(queries)}"
        for name, values in ordered
        if isinstance(queries := values.get("failed_queries"), dict)
    ]
    if failed:
        lines += ["", f"Queries refused or failed, scored as misses: {', '.join(failed)}."]
    by_category: Mapping[str, Mapping[str, Mapping[str, float]]] = document.get("by_category", {})  # type: ignore[assignment]
    if by_category:
        lines += ["", f"## {primary} per question category", ""]
        categories = sorted({category for per_run in by_category.values() for category in per_run})
        lines.append("| run | " + " | ".join(f"cat {category}" for category in categories) + " |")
        lines.append("|---|" + "---:|" * len(categories))
        for name, _ in ordered:
            per_run = by_category.get(name, {})
            cells = [f"{per_run[category][primary]:.4f}" if category in per_run else "" for category in categories]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot_runs(document: Mapping[str, object], path: Path) -> None:
    """Grouped bars of the primary metric: one group per strategy, one bar per fusion (single legs: one bar)."""
    runs: Mapping[str, Mapping[str, object]] = document["runs"]  # type: ignore[assignment]
    primary = str(document["primary_metric"])
    groups: dict[str, dict[str, float]] = {}
    for name, values in runs.items():
        strategy, _, fusion = name.partition("-")
        groups.setdefault(strategy, {})[fusion or strategy] = float(values[primary])  # type: ignore[arg-type]
    strategies = sorted(groups, key=lambda name: (_STRATEGY_ORDER.index(name) if name in _STRATEGY_ORDER else 99, name))
    figure, axes = plt.subplots(figsize=(9, 4.5))
    bar_width = 0.8 / max(len(bars) for bars in groups.values())
    for position, strategy in enumerate(strategies):
        bars = groups[strategy]
        for offset, (label, value) in enumerate(sorted(bars.items())):
            x = position - 0.4 + bar_width * (offset + 0.5)
            axes.bar(x, value, width=bar_width * 0.95, color=_colour(label))
            axes.text(x, value, f"{label}\n{value:.3f}", ha="center", va="bottom", fontsize=7)
    axes.set_xticks(range(len(strategies)), strategies)
    axes.set_ylabel(primary)
    top = max((value for bars in groups.values() for value in bars.values()), default=1.0)
    axes.set_ylim(0, min(1.0, top * 1.2))
    axes.set_title(f"{document['dataset']} ({document['split']}): {primary} by strategy and fusion")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def write_report(document: Mapping[str, object], output: Path) -> list[Path]:
    """Write `results.json`, `results.md` and `results.png` into `output` (created); return their paths."""
    output.mkdir(parents=True, exist_ok=True)
    results_path, table_path, plot_path = output / RESULTS_FILE, output / TABLE_FILE, output / PLOT_FILE
    results_path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    table_path.write_text(markdown_table(document), encoding="utf-8")
    plot_runs(document, plot_path)
    return [results_path, table_path, plot_path]


def trec_run_lines(run_name: str, rankings: Mapping[str, Mapping[str, float]]) -> list[str]:
    """A run in TREC format, `qid Q0 docid rank score run`, queries in id order, ranks 1-based.

    Within a query the order is the searcher's (scores are `depth - rank + 1`, so they strictly decrease);
    two files are equal exactly when every query ranked the same documents in the same order.
    """
    lines: list[str] = []
    for query_id in sorted(rankings):
        ordered = sorted(rankings[query_id].items(), key=lambda item: -item[1])
        lines.extend(
            f"{query_id} Q0 {document_id} {rank} {score:g} {run_name}"
            for rank, (document_id, score) in enumerate(ordered, start=1)
        )
    return lines


def write_run_files(results: Sequence[RunResult], output: Path) -> list[Path]:
    """Write each run's ranking as `output/runs/<run name>.trec` (beside `results.json`); return the paths."""
    folder = output / RUNS_SUBDIR
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for result in results:
        path = folder / f"{result.spec.name}{TREC_RUN_SUFFIX}"
        lines = trec_run_lines(result.spec.name, result.rankings)
        path.write_text("\n".join(lines) + ("\n" if lines else ""), encoding="utf-8")
        paths.append(path)
    return paths


_COLOURS: Final = {"rrf": "#4C72B0", "weighted": "#DD8452", "zscore": "#55A868"}


def _colour(label: str) -> str:
    return _COLOURS.get(label, "#8C8C8C")


def _rounded_breakdowns(
    breakdowns: Mapping[str, Mapping[str, Mapping[str, float]]],
) -> dict[str, dict[str, dict[str, float]]]:
    """Run name -> breakdown key (category, conversation) -> metric, rounded; runs without one are left out."""
    return {
        run: {
            key: {name: round(value, METRIC_DECIMALS) for name, value in means.items()} for key, means in by_key.items()
        }
        for run, by_key in breakdowns.items()
        if by_key
    }
