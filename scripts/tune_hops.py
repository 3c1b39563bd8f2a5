"""Measure several-hop evidence (neighbour expansion, query decomposition) offline on cached fused rankings.

Step 1 (needs the engines): every judged query runs once through `SearchService` with the default
configuration (its relative dates resolved against the conversation's clock, collapsing off, the fused top
`--depth` kept), and so does every sub-query the decomposers below derive from it; the hits are pickled to
`--cache` (sub-queries missing from an existing cache are run and added). Step 2: every variant re-orders
those lists with pure functions (neighbour score sharing or pull-in, sub-query fusion), and is scored with
ir-measures per category, with a paired bootstrap against the unchanged ranking.

Neighbours are read from the turn ids of the data set (`conv-26:D3:7`: session `D3`, turn 7), which is
what a measurement needs; a variant that wins must find them without the ids before it goes into the service.

Tune on the tuning conversations only (`--groups conv-26,conv-30,conv-41,conv-42,conv-43`).

    HF_HUB_OFFLINE=1 .venv/bin/python scripts/tune_hops.py --dataset ../shared/datasets/locomo \
        --split test --groups conv-26,conv-30,conv-41,conv-42,conv-43 --data-dir /tmp/hops/eval \
        --cache /tmp/hops/tuning.pkl --output docs/evaluation/round2/hops-locomo-tuning.json
"""

from __future__ import annotations

import argparse
import asyncio
import pickle
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from app.cli.eval_command import open_evaluation_engines
from app.config import load_settings
from app.evaluation.datasets import project_id_for
from app.evaluation.ingest import ensure_ingested
from app.evaluation.metrics import per_query_scores
from app.evaluation.runner import QueryRunner, default_run_spec, document_ranking, metric_names
from app.query.planner import SearchOptions
from app.search.calls import SearchCall

if TYPE_CHECKING:
    from collections.abc import Callable
    from datetime import datetime

    from app.domain.models import FusedHit

from hop_variants import Ranked, decomposers, variants
from tune_fusion import add_dataset_arguments, selected_dataset
from tuning_rows import variant_row, write_rows


@dataclass
class HopCache:
    """Main queries (query id -> its text, clock, project, category, fused hits) and sub-query hits."""

    queries: dict[str, tuple[str, datetime | None, str, str | None]] = field(default_factory=dict)
    hits: dict[tuple[str, str], list[Ranked]] = field(default_factory=dict)  # (project, text) -> hits


def lean(hits: list[FusedHit]) -> list[Ranked]:
    """What the variants need of a fused hit: its document, score and event time."""
    return [Ranked(hit.chunk.document_id, hit.score, hit.chunk.event_time) for hit in hits]


def wanted_texts(cache: HopCache) -> set[tuple[str, str]]:
    """Every (project, text) the cache must hold: the main queries and all their sub-queries."""
    wanted: set[tuple[str, str]] = set()
    for text, _clock, project, _category in cache.queries.values():
        wanted.add((project, text))
        for decompose in decomposers().values():
            wanted.update((project, sub) for sub in decompose(text))
    return wanted


async def collect(arguments: argparse.Namespace, cache: HopCache) -> None:
    """Run every selected query and sub-query the cache lacks through the service, once each."""
    dataset = selected_dataset(arguments)
    settings = load_settings().model_copy(update={"poimen_data_dir": arguments.data_dir})
    async with open_evaluation_engines(settings) as engines:
        summary = await ensure_ingested(dataset, engines, settings, marker_dir=arguments.data_dir / "eval-markers")
        for query in dataset.queries:
            project = project_id_for(dataset.name, query.group)
            cache.queries[query.query_id] = (query.text, summary.clocks.get(project), project, query.category)
        clocks = {project: clock for _text, clock, project, _category in cache.queries.values()}
        missing = sorted(wanted_texts(cache) - set(cache.hits))
        print(f"{len(missing)} texts to search", flush=True)
        service = QueryRunner(dataset, engines, settings, clocks=summary.clocks).service(default_run_spec(settings))
        for number, (project, text) in enumerate(missing, start=1):
            options = SearchOptions(project=project, limit=arguments.depth, collapse=False)
            call = SearchCall(query=text, options=options, auth_scope="tune", caller_key="tune", as_of=clocks[project])
            outcome = await service.search(call)
            cache.hits[project, text] = lean(list(outcome.result.hits))
            if number % 200 == 0:
                print(f"  {number}/{len(missing)}", flush=True)


def score_variants(
    arguments: argparse.Namespace, cache: HopCache, grid: dict[str, Callable[..., list[str]]]
) -> list[dict[str, object]]:
    dataset = selected_dataset(arguments)
    names = metric_names(dataset)
    categories = {query_id: category for query_id, (_t, _c, _p, category) in cache.queries.items()}
    baseline: dict[str, dict[str, float]] | None = None
    rows: list[dict[str, object]] = []
    for label, apply in grid.items():
        run = {}
        for query_id, (text, _clock, project, _category) in cache.queries.items():
            main = cache.hits[project, text]
            run[query_id] = document_ranking(query_id, apply(text, main, lambda sub, p=project: cache.hits[p, sub]))
        per_query = per_query_scores(dataset.qrels, run, names)
        baseline = baseline or per_query
        row = variant_row(label, per_query, baseline, categories)
        rows.append(row)
        difference, low, high = row["Recall@10 minus default"]
        by_category: dict[str, float] = row["Recall@10 by category"]
        print(
            f"{label:<44} R@10 {row['Recall@10']:.4f} diff {difference:+.4f} [{low:+.4f}, {high:+.4f}] "
            f"cat {' '.join(f'{key}:{value:.4f}' for key, value in sorted(by_category.items()))}",
            flush=True,
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_dataset_arguments(parser, split="test")
    parser.add_argument("--cache", type=Path, required=True, help="pickle of fused hits (extended when incomplete)")
    parser.add_argument("--depth", type=int, default=100, help="fused hits kept per query")
    parser.add_argument("--only", default="", help="comma-separated substrings: measure only matching variants")
    parser.add_argument("--output", type=Path, default=None)
    arguments = parser.parse_args()
    cache = pickle.loads(arguments.cache.read_bytes()) if arguments.cache.is_file() else HopCache()  # noqa: S301
    if not cache.queries or wanted_texts(cache) - set(cache.hits):
        asyncio.run(collect(arguments, cache))
        arguments.cache.write_bytes(pickle.dumps(cache))
    wanted = [part for part in arguments.only.split(",") if part]
    grid = {
        label: apply
        for label, apply in variants(arguments.dataset).items()
        if not wanted or label == "default (unchanged)" or any(part in label for part in wanted)
    }
    write_rows(arguments, score_variants(arguments, cache, grid))


if __name__ == "__main__":
    main()
