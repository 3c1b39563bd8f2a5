"""A chunk longer than the model's window: embed all of it (mean or max over windows) instead of its head.

all-MiniLM-L6-v2 reads 256 word pieces (`max_seq_length`; `embedder_onnx.py` truncates), while a chunk
holds up to `CHUNK_MAX_CHARS` (1,500) characters: about half of SciFact's chunks run past the window and
their tail never reaches the vector. This measures, offline, what the vector leg gains when it does:

1. `stats`: per data set, how many chunks (as the service cuts them, `embedding_text`) exceed the window.
2. `embed`: every chunk tokenised without truncation; with `--heads` the first window (today's input) and, for a
   chunk that does not fit, the windows after it, each `[CLS] + pieces + [SEP]` of the model's width,
   the last one aligned to the chunk's end; scheme `plain` (body pieces only) and `titled` (each later
   window starts with the chunk's first line, the breadcrumb, as the first window does). Cached in an .npz
   by chunk hash (`--vectors`).
3. `heads`: today's vectors read back from the data dir's pgvector (the first windows, not embedded again).
4. `score`: the service's legs per judged query (top 100 chunks each, as `scripts/tune_fusion.py` collects
   them; `--legs`), and exact-cosine semantic legs over every chunk of the project with each vector
   variant (`head` = today's vector; `mean-<scheme>` = normalised mean of the windows; `max-<scheme>` = the
   best window's cosine, which needs several stored vectors per chunk). Each semantic variant alone and
   fused with the service's lexical leg by the service's own `fuse` (z-score, 0.45 / 0.55, the default),
   collapsed to one chunk per document; nDCG@10 with 95 % paired-bootstrap intervals against `head`.
   Results and the full command list: docs/evaluation.md, "The model's window vs the chunk".

    HF_HUB_OFFLINE=1 .venv/bin/python scripts/window_embeddings.py score \
        --dataset ../shared/datasets/scifact --split train --data-dir /tmp/chunks-sci \
        --legs /tmp/chunks-work/legs-sci-train.pkl --vectors /tmp/chunks-work/windows-sci.npz \
        --output docs/evaluation/round2/window-embeddings-scifact-train.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import pickle
import time
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import numpy as np
import onnxruntime
from tokenizers import Tokenizer
from tune_fusion import add_dataset_arguments, collect_legs, selected_dataset

from app.cli.eval_command import open_evaluation_engines
from app.config import load_settings
from app.domain.models import LEXICAL_LEG, SEMANTIC_LEG, FusionMethod, FusionSettings, ScoredHit
from app.engines.embedder import packaged_model_path
from app.engines.embedder_export import INPUT_NAMES, OUTPUT_NAME, export_path
from app.engines.postgres_driver import fetch, project_read
from app.evaluation.datasets import project_id_for, read_corpus
from app.evaluation.metrics import mean_scores, paired_bootstrap, per_query_scores
from app.evaluation.runner import document_ranking
from app.ingestion.chunking import ChunkingPolicy
from app.ingestion.content_hashes import embedding_text
from app.ingestion.pipeline import IngestionPipeline
from app.query.optimizer import QueryOptimizer
from app.retrieval.fusion import fuse
from app.retrieval.postprocess import collapse_per_document

if TYPE_CHECKING:
    from app.domain.models import Chunk
    from app.evaluation.datasets import EvalDataset

MODEL = "all-MiniLM-L6-v2"
RETRIEVE_K = 100
SCHEMES = ("plain", "titled")
DEFAULT_FUSION = FusionSettings(method=FusionMethod.ZSCORE, rrf_k=1, weights={SEMANTIC_LEG: 0.45, LEXICAL_LEG: 0.55})
BATCH = 32


def corpus_chunks(dataset: EvalDataset) -> list[Chunk]:
    """The chunks the service stores for the corpus, cut by the configured policy (`IngestionPipeline.chunk`)."""
    policy = ChunkingPolicy.from_settings(load_settings())
    # `chunk` reads only the policy: this is the service's own chunking without its engines.
    cutter = SimpleNamespace(policy=policy)
    return [chunk for document in read_corpus(dataset) for chunk in IngestionPipeline.chunk(cutter, document)]  # type: ignore[arg-type]


class Model:
    """The service's ONNX export of MiniLM, fed with hand-built windows of word pieces."""

    def __init__(self, onnx_dir: Path) -> None:
        model_dir = packaged_model_path(MODEL)
        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tokenizer.no_truncation()
        self.tokenizer.no_padding()
        self.width = json.loads((model_dir / "sentence_bert_config.json").read_text())["max_seq_length"]
        target = export_path(model_dir, model_name=MODEL, folder=onnx_dir)
        self.session = onnxruntime.InferenceSession(str(target), providers=["CPUExecutionProvider"])

    def truncated(self, text: str) -> list[int]:
        """What the service feeds the model for `text`: its first `width - 2` pieces between [CLS] and [SEP]."""
        ids = self.tokenizer.encode(text).ids
        return ids if len(ids) <= self.width else [*ids[: self.width - 1], ids[-1]]

    def run(self, windows: list[list[int]]) -> np.ndarray:
        """Unit vectors of windows of piece ids (each already `[CLS] ... [SEP]`), in groups of equal length."""
        out = np.zeros((len(windows), 384), dtype=np.float32)
        order = sorted(range(len(windows)), key=lambda index: len(windows[index]))
        for start in range(0, len(order), BATCH):
            group = order[start : start + BATCH]
            width = max(len(windows[index]) for index in group)
            feeds = {name: np.zeros((len(group), width), dtype=np.int64) for name in INPUT_NAMES}
            for row, index in enumerate(group):
                feeds["input_ids"][row, : len(windows[index])] = windows[index]
                feeds["attention_mask"][row, : len(windows[index])] = 1
            (matrix,) = self.session.run([OUTPUT_NAME], feeds)
            out[group] = matrix
        return out


def window_starts(length: int, *, width: int, overlap: int) -> list[int]:
    """Starts of windows of `width` covering `length` pieces, `overlap` shared, the last one ending at the end."""
    if length <= width:
        return [0]
    stride = width - overlap
    starts = list(range(0, length - width, stride))
    return [*starts, length - width]


def chunk_windows(model: Model, text: str, *, scheme: str, overlap: int) -> list[list[int]]:
    """The chunk's windows of piece ids; the first is exactly what truncation feeds the model today."""
    encoding = model.tokenizer.encode(text)
    cls, sep = encoding.ids[0], encoding.ids[-1]
    pieces, offsets = encoding.ids[1:-1], encoding.offsets[1:-1]
    room = model.width - 2
    first = [cls, *pieces[:room], sep]
    if len(pieces) <= room:
        return [first]
    head: list[int] = []
    if scheme == "titled" and "\n" in text:
        line_end = text.index("\n")
        head = [piece for piece, (begin, _) in zip(pieces, offsets, strict=True) if begin < line_end]
    body = pieces[len(head) :]
    body_room = room - len(head)
    # The first window already covers the head and body[: body_room]; later windows cover the rest.
    starts = window_starts(len(body), width=body_room, overlap=overlap)[1:]
    return [first, *([cls, *head, *body[start : start + body_room], sep] for start in starts)]


def stats(arguments: argparse.Namespace) -> None:
    """How many chunks (cut by the configured `CHUNK_MAX_CHARS`) exceed the model's window, and by how much."""
    dataset = selected_dataset(arguments)
    model = Model(arguments.onnx_dir)
    texts = [embedding_text(chunk) for chunk in corpus_chunks(dataset)]
    pieces = np.array([len(item.ids) for item in model.tokenizer.encode_batch(texts)])  # with [CLS] and [SEP]
    over = pieces[pieces > model.width] - model.width
    print(f"{dataset.name}: {len(texts)} chunks, word pieces p50 {np.median(pieces):.0f} max {pieces.max()}")
    if over.size:
        print(
            f"  {over.size} ({over.size / len(texts):.1%}) exceed {model.width}: by p50 {np.median(over):.0f},", end=" "
        )
        print(
            f"mean {over.mean():.0f}, max {over.max()}; {over.sum() / pieces[pieces > model.width].sum():.1%}", end=" "
        )
        print("of their pieces are never read")
    else:
        print(f"  none exceeds {model.width}")


def embed(arguments: argparse.Namespace) -> None:
    dataset = selected_dataset(arguments)
    model = Model(arguments.onnx_dir)
    vectors = dict(np.load(arguments.vectors)) if arguments.vectors.is_file() else {}
    texts = {chunk.chunk_hash: embedding_text(chunk) for chunk in corpus_chunks(dataset)}
    schemes = arguments.schemes.split(",")
    todo = {
        key: text for key, text in texts.items() if not all(f"done-{scheme}:{key}" in vectors for scheme in schemes)
    }
    windows: list[list[int]] = []
    owners: list[tuple[str, str]] = []  # (vector name, chunk hash) per window
    for key, text in todo.items():
        for scheme in schemes:
            found = chunk_windows(model, text, scheme=scheme, overlap=arguments.overlap)
            if arguments.heads and f"head:{key}" not in vectors and ("head", key) not in owners[-1:]:
                windows.append(found[0])
                owners.append(("head", key))
            for window in found[1:]:
                windows.append(window)
                owners.append((f"tail-{scheme}", key))
            vectors[f"done-{scheme}:{key}"] = np.zeros(0, dtype=np.float32)
    heads = sum(1 for name, _ in owners if name == "head")
    print(f"{len(todo)} chunks, {heads} head windows, {len(windows) - heads} tail windows", flush=True)
    started = time.perf_counter()
    matrix = np.zeros((0, 384), dtype=np.float32)
    for start in range(0, len(windows), 1024):
        matrix = np.concatenate([matrix, model.run(windows[start : start + 1024])])
        elapsed = time.perf_counter() - started
        print(f"  {len(matrix)}/{len(windows)} windows, {len(matrix) / elapsed:.1f} windows/s", flush=True)
    grouped: dict[str, list[np.ndarray]] = {}
    for (name, key), row in zip(owners, matrix, strict=True):
        grouped.setdefault(f"{name}:{key}", []).append(row)
    vectors.update({key: np.stack(rows) for key, rows in grouped.items()})
    np.savez(arguments.vectors, **vectors)
    print(f"embedded in {time.perf_counter() - started:.0f} s", flush=True)


async def stored_heads(arguments: argparse.Namespace) -> dict[str, np.ndarray]:
    """Today's vectors as the service stored them, by chunk hash (read back from pgvector)."""
    dataset = selected_dataset(arguments)
    projects = {chunk.project_id for chunk in corpus_chunks(dataset)}
    settings = load_settings().model_copy(update={"poimen_data_dir": arguments.data_dir})
    heads: dict[str, np.ndarray] = {}
    async with open_evaluation_engines(settings) as engines:
        for project in sorted(projects):
            async with project_read(engines.vector._engine, [project]) as connection:  # noqa: SLF001 - a script's read
                statement = (
                    "SELECT chunk_id, chunk_hash, embedding::text AS vector FROM chunks WHERE project_id = :project"
                )
                for row in await fetch(connection, statement, {"project": project}):
                    vector = np.array(json.loads(row["vector"]), dtype=np.float32)[None, :]
                    heads[f"head:{row['chunk_hash']}"] = heads[f"head-of:{row['chunk_id']}"] = vector
    return heads


def read_heads(arguments: argparse.Namespace) -> None:
    vectors = dict(np.load(arguments.vectors)) if arguments.vectors.is_file() else {}
    heads = asyncio.run(stored_heads(arguments))
    print(f"{len(heads)} stored vectors read", flush=True)
    np.savez(arguments.vectors, **(vectors | heads))


def variant_vectors(vectors: dict[str, np.ndarray], chunk: Chunk) -> dict[str, np.ndarray]:
    """Per variant, the chunk's vectors: one row for `head` and the means, every window for the maxes.

    The stored vector by chunk id when the hash differs (4 SciFact abstracts: the service drops soft
    hyphens and zero-width spaces before chunking, this harness cuts the raw corpus).
    """
    key = chunk.chunk_hash
    head = vectors.get(f"head:{key}", vectors[f"head-of:{chunk.chunk_id}"])
    out = {"head": head}
    for scheme in SCHEMES:
        tail = vectors.get(f"tail-{scheme}:{key}")
        every = head if tail is None else np.concatenate([head, tail])
        mean = every.mean(axis=0)
        out[f"mean-{scheme}"] = (mean / np.linalg.norm(mean))[None, :]
        out[f"max-{scheme}"] = every
    return out


def score(arguments: argparse.Namespace) -> None:
    dataset = selected_dataset(arguments)
    arguments.retrieve_k, arguments.context_boosts = RETRIEVE_K, "1"
    if arguments.legs.is_file():
        legs, _ = pickle.loads(arguments.legs.read_bytes())  # noqa: S301 - our own cache file
    else:
        legs, categories = asyncio.run(collect_legs(arguments))
        arguments.legs.write_bytes(pickle.dumps((legs, categories)))
    query_legs = legs[1.0]
    vectors = dict(np.load(arguments.vectors))
    chunks = corpus_chunks(dataset)
    by_project: dict[str, list[Chunk]] = {}
    for chunk in chunks:
        by_project.setdefault(chunk.project_id, []).append(chunk)
    embedded = [scheme for scheme in SCHEMES if any(key.startswith(f"done-{scheme}:") for key in vectors)]
    variants = ["head", *(f"{pool}-{scheme}" for pool in ("mean", "max") for scheme in embedded)]
    matrices: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]] = {}
    for project, members in by_project.items():
        per_chunk = [variant_vectors(vectors, chunk) for chunk in members]
        matrices[project] = {}
        for variant in variants:
            rows = [item[variant] for item in per_chunk]
            owner = np.concatenate([np.full(len(row), index) for index, row in enumerate(rows)])
            matrices[project][variant] = (np.concatenate(rows), owner)
    model = Model(arguments.onnx_dir)
    queries = {query.query_id: query for query in dataset.queries if query.query_id in query_legs}
    # The semantic leg's text as the planner builds it (SciFact: the analysed query text; no names to drop).
    texts = [QueryOptimizer().analyze(query.text).search_text for query in queries.values()]
    query_matrix = model.run([model.truncated(text) for text in texts])
    runs: dict[str, dict[str, dict[str, float]]] = {}
    for (query_id, query), query_vector in zip(queries.items(), query_matrix, strict=True):
        project = project_id_for(dataset.name, query.group)
        members = by_project[project]
        semantic_service, lexical = query_legs[query_id]
        legs_by_variant = {"service": semantic_service[:RETRIEVE_K]}
        for variant in variants:
            matrix, owner = matrices[project][variant]
            similarities = np.full(len(members), -2.0)
            np.maximum.at(similarities, owner, matrix @ query_vector)
            top = np.argsort(-similarities, kind="stable")[:RETRIEVE_K]
            legs_by_variant[variant] = [ScoredHit(chunk=members[i], score=float(similarities[i])) for i in top]
        for variant, semantic in legs_by_variant.items():
            alone = collapse_per_document(semantic, 1)
            runs.setdefault(f"semantic {variant}", {})[query_id] = document_ranking(
                query_id, [hit.chunk.document_id for hit in alone]
            )
            hits = collapse_per_document(
                fuse({SEMANTIC_LEG: semantic, LEXICAL_LEG: lexical[:RETRIEVE_K]}, DEFAULT_FUSION), 1
            )
            runs.setdefault(f"hybrid {variant}", {})[query_id] = document_ranking(
                query_id, [hit.chunk.document_id for hit in hits]
            )
    report(arguments, dataset, runs)


def report(arguments: argparse.Namespace, dataset: EvalDataset, runs: dict[str, dict[str, dict[str, float]]]) -> None:
    metrics = ["nDCG@10", "R@100"] if not dataset.conversational else ["R@10", "nDCG@10"]
    primary = metrics[0]
    scores = {label: per_query_scores(dataset.qrels, run, metrics) for label, run in runs.items()}
    rows: dict[str, Any] = {}
    for label, per_metric in scores.items():
        leg = label.split()[0]
        baseline = scores[f"{leg} head"][primary]
        mean, low, high = paired_bootstrap(baseline, per_metric[primary])
        rows[label] = mean_scores(per_metric) | {f"{primary} vs head": [round(mean, 4), round(low, 4), round(high, 4)]}
        print(
            f"{label:<22} {primary} {rows[label][primary]:.4f}  R@100 {rows[label].get('R@100', 0):.4f}  vs head {mean:+.4f} [{low:+.4f}, {high:+.4f}]"
        )
    if arguments.trec_dir:
        arguments.trec_dir.mkdir(parents=True, exist_ok=True)
        for label, run in runs.items():
            lines = [
                f"{query_id} Q0 {document_id} {rank} {value} {label.replace(' ', '-')}"
                for query_id, ranking in run.items()
                for rank, (document_id, value) in enumerate(ranking.items(), start=1)
            ]
            (arguments.trec_dir / f"{label.replace(' ', '-')}.trec").write_text("\n".join(lines) + "\n")
    if arguments.output:
        arguments.output.parent.mkdir(parents=True, exist_ok=True)
        document = {
            "dataset": dataset.name,
            "split": arguments.split,
            "groups": arguments.groups,
            "overlap": arguments.overlap,
            "rows": rows,
        }
        arguments.output.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=("stats", "embed", "heads", "score"))
    add_dataset_arguments(parser, split="train")
    parser.add_argument("--legs", type=Path, default=None, help="pickle of the service's legs (built when missing)")
    parser.add_argument("--vectors", type=Path, default=None, help=".npz of window vectors by chunk hash")
    parser.add_argument("--onnx-dir", type=Path, required=True, help="where the service's ONNX export lies")
    parser.add_argument("--overlap", type=int, default=64, help="word pieces two windows share")
    parser.add_argument("--schemes", default="plain", help="window schemes to embed: plain, titled")
    parser.add_argument("--heads", action="store_true", help="embed first windows too (else read from --heads-from)")
    parser.add_argument("--trec-dir", type=Path, default=None)
    parser.add_argument("--output", type=Path, default=None)
    arguments = parser.parse_args()
    {"stats": stats, "embed": embed, "heads": read_heads, "score": score}[arguments.step](arguments)


if __name__ == "__main__":
    main()
