"""Fit and check the readable relevance (`final_score`) on cached legs of a training split.

Reads the per-leg pickles `scripts/tune_fusion.py --cache` writes (collects them when missing), then:
1. the lexical leg's first-hit BM25 over the split's queries (quartiles): the fitted half point of
   `bm25 / (bm25 + half)` is their median, so a typical best lexical match reads as 0.5;
2. ranking *by* the relevance (weighted mean of clamped cosine and squashed BM25) against the default
   z-score fusion, same weights, each collapsed to the best chunk per document, with a paired bootstrap;
3. how well one `min_score` separates relevant from other hits across all queries: the pooled AUC of the
   relevance of every query's top 10 (and of its first hit) against the judgements, with the half point
   fixed and grown with the query's scored terms (`bm25_half_for`) at each of `--exponents`.

    python scripts/calibrate_relevance.py --dataset ../shared/datasets/scifact --split train \
        --data-dir /tmp/sci/eval --cache /tmp/legs-sci-train.pkl
"""

from __future__ import annotations

import argparse
import asyncio
import json
import pickle
import statistics
import sys
from pathlib import Path
from typing import TYPE_CHECKING

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tune_fusion import add_dataset_arguments, collect_legs, selected_dataset

from app.domain.models import LEXICAL_LEG, SEMANTIC_LEG, FusedHit, LexicalQuery, ScoredHit
from app.evaluation.metrics import mean_scores, paired_bootstrap, per_query_scores
from app.evaluation.runner import document_ranking
from app.query.optimizer import QueryOptimizer
from app.retrieval.fusion import zscore_fusion
from app.retrieval.postprocess import collapse_per_document
from app.retrieval.relevance import BM25_HALF_RELEVANCE, BM25_HALF_TERMS, readable_relevance, scored_terms

if TYPE_CHECKING:
    from collections.abc import Mapping

METRICS = ["nDCG@10", "Recall@10", "Recall@100"]


def ranked_by_relevance(fused: list[FusedHit], weights: dict[str, float], half: float) -> list[FusedHit]:
    """The fused hits re-ordered by their uncapped relevance (ties: the fusion's order)."""
    ordered = sorted(
        fused,
        key=lambda hit: (
            -next(
                readable_relevance([hit], legs=(SEMANTIC_LEG, LEXICAL_LEG), weights=weights, bm25_half=half)
            ).readable_score
        ),
    )
    return list(readable_relevance(ordered, legs=(SEMANTIC_LEG, LEXICAL_LEG), weights=weights, bm25_half=half))


def run_of(
    legs: dict[str, tuple[list[ScoredHit], list[ScoredHit]]], weights: dict[str, float], half: float | None
) -> dict[str, dict[str, float]]:
    run = {}
    for query_id, (semantic, lexical) in legs.items():
        fused = zscore_fusion({SEMANTIC_LEG: semantic, LEXICAL_LEG: lexical}, weights=weights)
        if half is not None:
            fused = ranked_by_relevance(fused, weights, half)
        hits = collapse_per_document(fused, 1)
        run[query_id] = document_ranking(query_id, [hit.chunk.document_id for hit in hits])
    return run


def pooled_auc(
    legs: dict[str, tuple[list[ScoredHit], list[ScoredHit]]],
    lexical_queries: dict[str, LexicalQuery],
    qrels: Mapping[str, Mapping[str, int]],
    weights: dict[str, float],
    exponent: float | None,
) -> dict[str, float]:
    """AUC of the readable relevance against the judgements, pooled over every query's top 10 and first hits.

    `exponent` None: the fixed half point; else it grows as `(terms / BM25_HALF_TERMS) ** exponent`.
    """
    top, first = [], []
    for query_id, (semantic, lexical) in legs.items():
        query = lexical_queries[query_id]
        half = BM25_HALF_RELEVANCE
        if exponent is not None:
            half *= (max(scored_terms(query), 1) / BM25_HALF_TERMS) ** exponent
        fused = zscore_fusion({SEMANTIC_LEG: semantic, LEXICAL_LEG: lexical}, weights=weights)
        hits = collapse_per_document(
            list(readable_relevance(fused, legs=(SEMANTIC_LEG, LEXICAL_LEG), weights=weights, bm25_half=half)), 1
        )[:10]
        judged = qrels.get(query_id, {})
        labelled = [(hit.relevance, judged.get(hit.chunk.document_id, 0) > 0) for hit in hits]
        top.extend(labelled)
        first.extend(labelled[:1])
    return {"top10": round(_auc(top), 4), "first_hit": round(_auc(first), 4)}


def _auc(pairs: list[tuple[float | None, bool]]) -> float:
    ordered = sorted((score or 0.0, label) for score, label in pairs)
    positives = sum(label for _, label in ordered)
    rank_sum = sum(rank for rank, (_, label) in enumerate(ordered, start=1) if label)
    return (rank_sum - positives * (positives + 1) / 2) / (positives * (len(ordered) - positives))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_dataset_arguments(parser, split="train")
    parser.add_argument("--cache", type=Path, required=True)
    parser.add_argument("--retrieve-k", type=int, default=100)
    parser.add_argument("--context-boosts", default="1.0")
    parser.add_argument("--semantic-weight", type=float, default=0.45)
    parser.add_argument("--halves", default="5,10,20", help="BM25 half points to rank by, besides the fitted one")
    parser.add_argument("--exponents", default="0.3,0.5,0.75,1.0", help="half-point growth with query terms to compare")
    parser.add_argument("--output", type=Path, default=None)
    arguments = parser.parse_args()
    if arguments.cache.is_file():
        boost_legs, _ = pickle.loads(arguments.cache.read_bytes())  # noqa: S301 - our own cache file
    else:
        boost_legs, categories = asyncio.run(collect_legs(arguments))
        arguments.cache.write_bytes(pickle.dumps((boost_legs, categories)))
    legs = boost_legs[float(arguments.context_boosts.split(",")[0])]
    dataset = selected_dataset(arguments)
    first_bm25 = sorted(lexical[0].score for _, lexical in legs.values() if lexical)
    first_cosine = sorted(semantic[0].score for semantic, _ in legs.values() if semantic)
    quartiles = statistics.quantiles(first_bm25, n=4)
    fitted = round(quartiles[1], 2)
    weights = {SEMANTIC_LEG: arguments.semantic_weight, LEXICAL_LEG: 1 - arguments.semantic_weight}
    baseline = per_query_scores(dataset.qrels, run_of(legs, weights, None), METRICS)
    report: dict[str, object] = {
        "queries": len(legs),
        "first_hit_bm25_quartiles": [round(value, 3) for value in quartiles],
        "first_hit_cosine_quartiles": [round(value, 3) for value in statistics.quantiles(first_cosine, n=4)],
        "fitted_bm25_half": fitted,
        "zscore": {name: round(value, 4) for name, value in mean_scores(baseline).items()},
    }
    for half in sorted({fitted, *(float(value) for value in arguments.halves.split(","))}):
        scores = per_query_scores(dataset.qrels, run_of(legs, weights, half), METRICS)
        mean, low, high = paired_bootstrap(baseline["nDCG@10"], scores["nDCG@10"])
        report[f"relevance-ranked half={half}"] = {
            **{name: round(value, 4) for name, value in mean_scores(scores).items()},
            "nDCG@10 minus zscore": [round(mean, 4), round(low, 4), round(high, 4)],
        }
    optimizer = QueryOptimizer()
    texts = {query.query_id: query.text for query in dataset.queries}
    lexical_queries = {query_id: optimizer.analyze(texts[query_id]).lexical_query for query_id in legs}
    report["pooled AUC, fixed half"] = pooled_auc(legs, lexical_queries, dataset.qrels, weights, None)
    for exponent in (float(value) for value in arguments.exponents.split(",")):
        report[f"pooled AUC, half grown ** {exponent}"] = pooled_auc(
            legs, lexical_queries, dataset.qrels, weights, exponent
        )
    text = json.dumps(report, indent=2)
    print(text)
    if arguments.output is not None:
        arguments.output.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
