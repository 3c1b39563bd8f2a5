"""Measure dense pseudo-relevance feedback (Rocchio on the query vector) offline, on cached plans and legs.

Step 1 is `tune_prf.py`'s: every judged query runs once through `SearchService` with the default
configuration and its plan, both legs and the fused ranking are pickled to `--cache` (the same cache
format, so one cache serves both harnesses).

Step 2 (PostgreSQL alone): for each variant (feedback documents k, original-vector weight alpha, where
the feedback comes from), the query vector is the service's (`embed_query` of the plan's semantic text);
the vectors of the first k distinct documents' best chunks (of the service's fused ranking, or of the
semantic leg's own) are read from PostgreSQL; the new query vector is alpha q + (1 - alpha) mean(feedback),
renormalised; the semantic leg runs again through the service's own `PgVectorIndex.search` with it, and
the legs are fused and post-processed exactly as the searcher does (`tune_prf.post_process`). A lexical-only
plan is unchanged; a semantic-only plan ranks the new leg alone.

Tune on LoCoMo's tuning conversations and SciFact's train split only:

    HF_HUB_OFFLINE=1 .venv/bin/python scripts/tune_dense_prf.py --dataset ../shared/datasets/scifact \
        --split train --data-dir /tmp/cs/data-1500 --cache /tmp/dprf/sci-train.pkl
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from app.cli.eval_command import open_evaluation_engines
from app.config import load_settings
from app.domain.models import LEXICAL_LEG, SEMANTIC_LEG, ScoredHit, SearchStrategy
from app.engines.postgres_driver import project_read
from app.retrieval.fusion import fuse, rank_single_leg

if TYPE_CHECKING:
    from app.domain.models import Chunk

from tune_fusion import add_dataset_arguments
from tune_prf import Case, PrfCache, add_cache_arguments, cached_or_collected, post_process, rerank, score
from tuning_rows import write_rows

READ_VECTORS = "SELECT chunk_id, embedding::text FROM chunks WHERE project_id = $1 AND chunk_id = ANY($2::text[])"


@dataclass(frozen=True)
class Variant:
    documents: int
    original_weight: float
    feedback: str  # "fused" (the service's ranking) or "semantic" (the leg's own first pass)

    @property
    def label(self) -> str:
        return f"dense prf k={self.documents} alpha={self.original_weight} from {self.feedback}"


def normalised(vector: list[float]) -> list[float]:
    norm = math.sqrt(sum(value * value for value in vector)) or 1.0
    return [value / norm for value in vector]


def feedback_chunks(ranking: list[str], chunks: dict[str, Chunk], count: int) -> list[str]:
    """The first `count` distinct documents' best chunk ids of `ranking`."""
    picked: list[str] = []
    seen: set[str] = set()
    for chunk_id in ranking:
        document = chunks[chunk_id].document_id
        if document in seen:
            continue
        seen.add(document)
        picked.append(chunk_id)
        if len(picked) == count:
            break
    return picked


async def rank_variants(arguments: argparse.Namespace, cache: PrfCache, variants: list[Variant]) -> dict[str, dict]:
    settings = load_settings().model_copy(update={"poimen_data_dir": arguments.data_dir})
    runs: dict[str, dict[str, list[str]]] = {variant.label: {} for variant in variants}
    runs["re-searched, alpha=1 (check)"] = {}
    vectors: dict[str, list[float]] = {}
    async with open_evaluation_engines(settings) as engines:
        engine = engines.vector._engine  # noqa: SLF001 - a measurement reads the stored vectors
        for number, (query_id, case) in enumerate(cache.cases.items(), start=1):
            plan = case.plan
            unchanged = [cache.chunks[cid].document_id for cid in case.ranking]
            if SEMANTIC_LEG not in case.legs or plan.strategy not in {SearchStrategy.HYBRID, SearchStrategy.SEMANTIC}:
                for run in runs.values():
                    run[query_id] = unchanged
                continue
            query_vector = await engines.embedder.embed_query(plan.semantic_text)
            wanted = {
                cid
                for variant in variants
                for cid in feedback_chunks(first_pass(case, variant), cache.chunks, variant.documents)
            } - vectors.keys()
            if wanted:
                async with project_read(engine, [case.project]) as connection:
                    rows = await connection.fetch(READ_VECTORS, case.project, sorted(wanted))
                for chunk_id, literal in rows:
                    vectors[chunk_id] = [float(value) for value in literal.strip("[]").split(",")]
            checked = await research(engines, case, cache, query_vector)
            runs["re-searched, alpha=1 (check)"][query_id] = checked
            for variant in variants:
                picked = feedback_chunks(first_pass(case, variant), cache.chunks, variant.documents)
                feedback = [vectors[cid] for cid in picked if cid in vectors]
                if not feedback:
                    runs[variant.label][query_id] = unchanged
                    continue
                mean = [sum(column) / len(feedback) for column in zip(*feedback, strict=True)]
                alpha = variant.original_weight
                moved = normalised([alpha * q + (1 - alpha) * f for q, f in zip(query_vector, mean, strict=True)])
                runs[variant.label][query_id] = await research(engines, case, cache, moved)
            if number % 200 == 0:
                print(f"  {number}/{len(cache.cases)}", flush=True)
    return runs


def first_pass(case: Case, variant: Variant) -> list[str]:
    if variant.feedback == "fused":
        return case.ranking
    return [chunk_id for chunk_id, _ in case.legs[SEMANTIC_LEG]]


async def research(engines: object, case: Case, cache: PrfCache, vector: list[float]) -> list[str]:
    """The document ids of `case` with its semantic leg searched again with `vector`."""
    plan = case.plan
    found = await engines.vector.search(vector, top_k=plan.semantic_retrieve_k, filters=plan.filters)  # type: ignore[attr-defined]
    for hit in found:
        cache.chunks.setdefault(hit.chunk.chunk_id, hit.chunk)
    if any(cid not in cache.chunks for hits in case.legs.values() for cid, _ in hits):
        return [cache.chunks[cid].document_id for cid in case.ranking]
    legs = {leg: [ScoredHit(cache.chunks[cid], s) for cid, s in hits] for leg, hits in case.legs.items()}
    legs[SEMANTIC_LEG] = found
    if plan.strategy is SearchStrategy.HYBRID and LEXICAL_LEG in legs:
        ranked = fuse(legs, plan.fusion)
    else:
        ranked = rank_single_leg(legs[SEMANTIC_LEG], leg=SEMANTIC_LEG)
    return [hit.chunk.document_id for hit in post_process(plan, ranked)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_dataset_arguments(parser, split="test")
    add_cache_arguments(parser)
    parser.add_argument("--documents", default="1,3,5,10", help="feedback documents k swept")
    parser.add_argument("--weights", default="0.5,0.7,0.85", help="original-vector weights (alpha) swept")
    parser.add_argument("--feedback", default="fused,semantic", help="feedback from: fused, semantic")
    parser.add_argument("--output", type=Path, default=None)
    arguments = parser.parse_args()
    cache = cached_or_collected(arguments)
    variants = [
        Variant(int(k), float(w), source)
        for source, k, w in itertools.product(
            arguments.feedback.split(","), arguments.documents.split(","), arguments.weights.split(",")
        )
    ]
    searched = asyncio.run(rank_variants(arguments, cache, variants))
    runs: dict[str, dict[str, list[str]]] = {
        "unchanged": {qid: [cache.chunks[cid].document_id for cid in c.ranking] for qid, c in cache.cases.items()},
        "re-fused (check)": {qid: rerank(c, cache.chunks, None) for qid, c in cache.cases.items()},
    }
    runs.update(searched)
    write_rows(arguments, score(arguments, runs))


if __name__ == "__main__":
    main()
