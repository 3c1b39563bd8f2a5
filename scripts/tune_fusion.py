"""Sweep fusion settings offline on cached per-leg rankings (fusion is pure, so no engine runs per setting).

Step 1 (needs the engines, once per data set + split): every judged query runs the real semantic and
lexical legs (optimizer -> planner -> HybridSearcher) with `--retrieve-k` chunks each; the hits are
pickled to `--cache`. Step 2: every fusion setting re-fuses those lists with `app.retrieval.fusion.fuse`,
collapses to the best chunk per document exactly as the searcher does, and is scored with ir-measures.

Tune on training data only: SciFact `--split train`; LoCoMo `--groups conv-26,conv-30,conv-41,conv-42,conv-43`.
The lexical leg runs once per `--context-boosts` value (tantivy's `FieldBoosts.context`, a query-time
weight, so one index serves them all); every row of the output names its `context_boost`.

    HF_HUB_OFFLINE=1 .venv/bin/python scripts/tune_fusion.py --dataset ../shared/datasets/scifact \
        --split train --data-dir /tmp/ctx/sci/eval --cache /tmp/ctx/legs-sci-train.pkl \
        --context-boosts 0,0.25,0.5,1 --coarse --output docs/evaluation/tuning-scifact-train-context.json
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import pickle
from dataclasses import replace
from pathlib import Path

from app.cli.eval_command import open_evaluation_engines
from app.config import load_settings
from app.domain.models import (
    LEXICAL_LEG,
    SEMANTIC_LEG,
    FusionMethod,
    FusionSettings,
    ScoredHit,
    SearchPlan,
    SearchStrategy,
)
from app.engines.tantivy_index import TantivyLexicalIndex
from app.engines.tantivy_query import FieldBoosts
from app.evaluation.datasets import EvalDataset, load_dataset, project_id_for
from app.evaluation.ingest import ensure_ingested
from app.evaluation.metrics import mean_scores, per_query_scores
from app.evaluation.runner import document_ranking, metric_names
from app.query.optimizer import QueryOptimizer
from app.query.planner import SearchOptions, build_plan
from app.retrieval.fusion import fuse, rank_single_leg
from app.retrieval.postprocess import collapse_per_document
from app.retrieval.searcher import HybridSearcher

LegHits = dict[str, tuple[list[ScoredHit], list[ScoredHit]]]
BoostLegs = dict[float, LegHits]
"""Per context boost (`FieldBoosts.context`), the legs of every query; the semantic leg is the same in all."""


async def collect_legs(arguments: argparse.Namespace) -> tuple[BoostLegs, dict[str, str | None]]:
    """Run both legs per query; the lexical leg once per context boost (a query-time weight, same index)."""
    dataset = selected_dataset(arguments)
    settings = load_settings().model_copy(update={"poimen_data_dir": arguments.data_dir})
    boosts = [float(value) for value in arguments.context_boosts.split(",")]
    legs: BoostLegs = {boost: {} for boost in boosts}
    async with open_evaluation_engines(settings) as engines:
        summary = await ensure_ingested(dataset, engines, settings, marker_dir=arguments.data_dir / "eval-markers")
        searchers = {
            # Readers only: the writer stays with `engines.lexical`, which wrote the index above.
            boost: HybridSearcher(
                vector=engines.vector,
                lexical=TantivyLexicalIndex(arguments.data_dir / "lexical", boosts=FieldBoosts(context=boost)),
                embedder=engines.embedder,
            )
            for boost in boosts
        }
        optimizers = {
            project: QueryOptimizer(clock=lambda moment=moment: moment) for project, moment in summary.clocks.items()
        }
        for number, query in enumerate(dataset.queries, start=1):
            project = project_id_for(dataset.name, query.group)
            analysis = optimizers.get(project, QueryOptimizer()).analyze(query.text)
            depth = {
                "semantic_retrieve_k": arguments.retrieve_k,
                "lexical_retrieve_k": arguments.retrieve_k,
                "limit": arguments.retrieve_k,
            }
            options = SearchOptions(project=project, limit=100, strategy=SearchStrategy.SEMANTIC, collapse=False)
            plan = replace(build_plan(analysis, options, settings), **depth)
            semantic = await _hits(searchers[boosts[0]], plan)
            options = replace(options, strategy=SearchStrategy.LEXICAL)
            plan = replace(build_plan(analysis, options, settings), **depth)
            for boost, searcher in searchers.items():
                legs[boost][query.query_id] = (semantic, await _hits(searcher, plan))
            if number % 100 == 0:
                print(f"  {number}/{len(dataset.queries)} queries", flush=True)
    return legs, {query.query_id: query.category for query in dataset.queries}


async def _hits(searcher: HybridSearcher, plan: SearchPlan) -> list[ScoredHit]:
    result = await searcher.search(plan)
    return [ScoredHit(chunk=hit.chunk, score=hit.score) for hit in result.hits]


def selected_dataset(arguments: argparse.Namespace) -> EvalDataset:
    dataset = load_dataset(arguments.dataset, split=arguments.split)
    if arguments.groups:
        wanted = set(arguments.groups.split(","))
        queries = tuple(query for query in dataset.queries if query.group in wanted)
        dataset = replace(dataset, queries=queries, qrels={q.query_id: dataset.qrels[q.query_id] for q in queries})
    return dataset


def fused_run(
    legs: LegHits, fusion: FusionSettings | None, retrieve_k: int, leg: str | None = None
) -> dict[str, dict[str, float]]:
    run = {}
    for query_id, (semantic, lexical) in legs.items():
        ranked = {SEMANTIC_LEG: semantic[:retrieve_k], LEXICAL_LEG: lexical[:retrieve_k]}
        hits = rank_single_leg(ranked[leg], leg=leg) if fusion is None else fuse(ranked, fusion)
        hits = collapse_per_document(hits, 1)
        run[query_id] = document_ranking(query_id, [hit.chunk.document_id for hit in hits])
    return run


def settings_grid() -> list[tuple[str, FusionSettings]]:
    grid: list[tuple[str, FusionSettings]] = []
    for k, weight in itertools.product((1, 5, 10, 20, 40, 60, 100), (0.3, 0.4, 0.5, 0.6, 0.7)):
        weights = {SEMANTIC_LEG: weight, LEXICAL_LEG: 1 - weight}
        grid.append((f"rrf k={k} w_sem={weight}", FusionSettings(method=FusionMethod.RRF, rrf_k=k, weights=weights)))
    for weight in (0.2, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.8):
        weights = {SEMANTIC_LEG: weight, LEXICAL_LEG: 1 - weight}
        grid.append(
            (f"weighted w_sem={weight}", FusionSettings(method=FusionMethod.WEIGHTED, rrf_k=1, weights=weights))
        )
        grid.append((f"zscore w_sem={weight}", FusionSettings(method=FusionMethod.ZSCORE, rrf_k=1, weights=weights)))
    return grid


def add_dataset_arguments(parser: argparse.ArgumentParser, *, split: str) -> None:
    """The data-set selection the evaluation scripts share: --dataset, --split, --groups, --data-dir."""
    parser.add_argument("--dataset", type=Path, required=True)
    parser.add_argument("--split", default=split)
    parser.add_argument("--groups", default="", help="comma-separated conversations to use (LoCoMo)")
    parser.add_argument("--data-dir", type=Path, required=True, help="an ingested evaluation data dir")


def _coarse(label: str) -> bool:
    """The settings a context-boost sweep keeps: every weighted/z-score weight, RRF at k 1, 5 and 60."""
    return not label.startswith("rrf") or label.split()[1] in {"k=1", "k=5", "k=60"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_dataset_arguments(parser, split="train")
    parser.add_argument("--cache", type=Path, required=True, help="pickle of per-leg hits (built when missing)")
    parser.add_argument("--retrieve-k", type=int, default=100, help="hits fetched per leg and cached")
    parser.add_argument("--depths", default="50,100", help="retrieve_k values swept (each <= --retrieve-k)")
    parser.add_argument("--output", type=Path, default=None)
    parser.add_argument(
        "--context-boosts", default="0,0.25,0.5,1", help="tantivy context-field boosts swept (first = semantic run)"
    )
    parser.add_argument("--coarse", action="store_true", help="weighted/z-score and a few RRF settings only")
    arguments = parser.parse_args()
    if arguments.cache.is_file():
        legs, categories = pickle.loads(arguments.cache.read_bytes())  # noqa: S301 - our own cache file
    else:
        legs, categories = asyncio.run(collect_legs(arguments))
        arguments.cache.write_bytes(pickle.dumps((legs, categories)))
    dataset = selected_dataset(arguments)
    names = metric_names(dataset)
    primary = "Recall@10" if dataset.conversational else "nDCG@10"
    rows = []
    grid = settings_grid()
    if arguments.coarse:
        grid = [(label, fusion) for label, fusion in grid if _coarse(label)]
    for (boost, boost_legs), depth in itertools.product(
        legs.items(), (int(value) for value in arguments.depths.split(","))
    ):
        tag = f"ctx={boost:g} k={depth:<4}"
        for leg in (SEMANTIC_LEG, LEXICAL_LEG):
            scores = mean_scores(per_query_scores(dataset.qrels, fused_run(boost_legs, None, depth, leg), names))
            rows.append({"setting": f"{leg} only", "context_boost": boost, "retrieve_k": depth, **scores})
            print(f"{tag} {leg + ' only':<28} {primary} {scores[primary]:.4f}", flush=True)
        for label, fusion in grid:
            scores = mean_scores(per_query_scores(dataset.qrels, fused_run(boost_legs, fusion, depth), names))
            rows.append({"setting": label, "context_boost": boost, "retrieve_k": depth, **scores})
            print(f"{tag} {label:<28} {primary} {scores[primary]:.4f}", flush=True)
    rows.sort(key=lambda row: -row[primary])
    print("best:", json.dumps(rows[:10], indent=1))
    if arguments.output:
        arguments.output.parent.mkdir(parents=True, exist_ok=True)
        document = {
            "dataset": dataset.name,
            "split": arguments.split,
            "groups": arguments.groups,
            "primary": primary,
            "rows": rows,
        }
        arguments.output.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
