"""Measure the memory-awareness stages (dates, names, session diversity) offline on cached fused rankings.

Step 1 (needs the engines, once per data set + split): every judged query runs through `SearchService` with
the default configuration, its relative dates resolved against the conversation's clock, the awareness
stages off, collapsing off and the fused top `--depth` kept; the hits are pickled to `--cache`. Step 2:
every variant reads each query as the service does (`QueryOptimizer.analyze` at its conversation's clock)
and re-orders those lists with the pure functions the searcher calls
(`app.retrieval.evidence.prefer_evidence`, `app.retrieval.diversity.cap_per_session`), collapses to one
chunk per document as the evaluation does, and is scored with ir-measures, per category, with a paired
bootstrap against the unchanged ranking. The stages only re-order the fused list, so this equals a live run.

Tune on the tuning conversations only (`--groups conv-26,conv-30,conv-41,conv-42,conv-43`).

    HF_HUB_OFFLINE=1 .venv/bin/python scripts/tune_awareness.py --dataset ../shared/datasets/locomo \
        --split test --groups conv-26,conv-30,conv-41,conv-42,conv-43 --data-dir /tmp/quality-data/eval \
        --cache /tmp/awareness-tuning.pkl --output docs/evaluation/round2/awareness-locomo-tuning.json
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import pickle
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from app.cli.eval_command import open_evaluation_engines
from app.config import load_settings
from app.domain.reordering import EvidencePreferences
from app.evaluation.datasets import project_id_for
from app.evaluation.ingest import ensure_ingested
from app.evaluation.metrics import per_query_scores
from app.evaluation.runner import QueryRunner, default_run_spec, document_ranking, metric_names
from app.query.optimizer import QueryOptimizer
from app.query.planner import SearchOptions
from app.retrieval.diversity import cap_per_session
from app.retrieval.evidence import prefer_evidence
from app.search.calls import SearchCall

if TYPE_CHECKING:
    from datetime import datetime

    from app.domain.models import FusedHit

from tune_fusion import add_dataset_arguments, selected_dataset
from tuning_rows import variant_row


@dataclass(frozen=True)
class CachedQuery:
    """One judged query: its text, its conversation's clock, its category and the default's fused hits."""

    text: str
    clock: datetime | None
    category: str | None
    hits: list[FusedHit]


async def collect(arguments: argparse.Namespace) -> dict[str, CachedQuery]:
    """Run every selected query once through the service (default configuration, awareness off)."""
    dataset = selected_dataset(arguments)
    settings = load_settings().model_copy(update={"poimen_data_dir": arguments.data_dir})
    cached: dict[str, CachedQuery] = {}
    async with open_evaluation_engines(settings) as engines:
        summary = await ensure_ingested(dataset, engines, settings, marker_dir=arguments.data_dir / "eval-markers")
        runner = QueryRunner(dataset, engines, settings, clocks=summary.clocks)
        service = runner.service(default_run_spec(settings))
        for number, query in enumerate(dataset.queries, start=1):
            project = project_id_for(dataset.name, query.group)
            options = SearchOptions(project=project, limit=arguments.depth, collapse=False)
            clock = summary.clocks.get(project)
            call = SearchCall(query=query.text, options=options, auth_scope="tune", caller_key="tune", as_of=clock)
            outcome = await service.search(call)
            cached[query.query_id] = CachedQuery(query.text, clock, query.category, list(outcome.result.hits))
            if number % 200 == 0:
                print(f"  {number}/{len(dataset.queries)} queries", flush=True)
    return cached


Variant = "Callable[[CachedQuery], list[FusedHit]]"


@functools.cache
def _query_reader() -> QueryOptimizer:
    """The optimizer the service reads queries with (bundled abbreviations, no listed names), built once."""
    return QueryOptimizer()


def variant(preferences: EvidencePreferences, session_cap: int | None = None) -> Variant:
    """Re-order one query's cached hits as the searcher would with these settings."""

    def apply(query: CachedQuery) -> list[FusedHit]:
        # The service's reading, clock included: a count back it reads as a range ("3 days ago") names the time.
        intent = _query_reader().analyze(query.text, now=query.clock)
        wanted = replace(
            preferences,
            names=intent.names if preferences.entity_boost or preferences.mention_boost else (),
            prefer_dated=intent.asks_when and preferences.date_boost > 0,
            prefer_recent=intent.asks_latest and preferences.recency_boost > 0,
        )
        hits = prefer_evidence(query.hits, wanted)
        return cap_per_session(hits, session_cap) if session_cap else hits

    return apply


def variants() -> dict[str, Variant]:
    """The settings measured: each stage alone over a few strengths, then the combinations that won."""
    none = EvidencePreferences()
    grid: dict[str, Variant] = {"default (unchanged)": variant(none)}
    for boost in (0.25, 0.5, 1.0, 1.5, 2.0, 3.0):
        grid[f"date boost {boost}"] = variant(replace(none, date_boost=boost))
    for boost in (0.1, 0.25, 0.5):
        grid[f"recency boost {boost}"] = variant(replace(none, recency_boost=boost))
    for boost in (0.1, 0.25, 0.5, 1.0):
        grid[f"speaker boost {boost}"] = variant(replace(none, entity_boost=boost))
        grid[f"mention boost {boost}"] = variant(replace(none, mention_boost=boost))
    for cap in (1, 2, 3, 5, 10):
        grid[f"session cap {cap}"] = variant(none, cap)
    for boost in (1.0, 1.5, 2.0):
        dated = replace(none, date_boost=boost)
        grid[f"date boost {boost} + speaker 0.1"] = variant(replace(dated, entity_boost=0.1))
    return grid


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_dataset_arguments(parser, split="test")
    parser.add_argument("--cache", type=Path, required=True, help="pickle of fused hits (built when missing)")
    parser.add_argument("--depth", type=int, default=100, help="fused hits kept per query")
    parser.add_argument("--only", default="", help="comma-separated substrings: measure only matching variants")
    parser.add_argument("--output", type=Path, default=None)
    arguments = parser.parse_args()
    if arguments.cache.is_file():
        cached = pickle.loads(arguments.cache.read_bytes())  # noqa: S301 - our own cache file
    else:
        cached = asyncio.run(collect(arguments))
        arguments.cache.write_bytes(pickle.dumps(cached))
    dataset = selected_dataset(arguments)
    names = metric_names(dataset)
    categories = {query_id: query.category for query_id, query in cached.items()}
    baseline: dict[str, dict[str, float]] | None = None
    rows = []
    wanted = [part for part in arguments.only.split(",") if part]
    for label, apply in variants().items():
        if wanted and label != "default (unchanged)" and not any(part in label for part in wanted):
            continue
        run = {
            query_id: document_ranking(query_id, [hit.chunk.document_id for hit in apply(query)])
            for query_id, query in cached.items()
        }
        per_query = per_query_scores(dataset.qrels, run, names)
        baseline = baseline or per_query
        row = variant_row(label, per_query, baseline, categories)
        rows.append(row)
        difference, low, high = row["Recall@10 minus default"]
        print(
            f"{label:<28} R@10 {row['Recall@10']:.4f} nDCG@10 {row['nDCG@10']:.4f} "
            f"diff {difference:+.4f} [{low:+.4f}, {high:+.4f}] by cat {row['Recall@10 by category']}",
            flush=True,
        )
    if arguments.output:
        arguments.output.parent.mkdir(parents=True, exist_ok=True)
        document = {"dataset": dataset.name, "split": arguments.split, "groups": arguments.groups, "rows": rows}
        arguments.output.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
