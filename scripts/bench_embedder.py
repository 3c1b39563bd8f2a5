"""Query embedding: ONNX against torch on the evaluation queries, in one run.

Prints, for the SciFact test queries and the LoCoMo queries:
  agreement      mean and minimum cosine between the ONNX and the torch vector of each query
  one query      p50/p95 ms of `embed_query` called one at a time (the service's path: micro-batcher thread),
                 for each backend, and of the bare ONNX session on one thread (the floor of this model here),
                 back to back and after 2, 8 and 20 ms idle: a pass that follows idle time reads the model's
                 weights back into the caches, which is what a query arriving alone pays
  concurrent     queries/s with 16 callers at once: micro-batching folds them into shared passes
and the resident memory after loading both.

    .venv/bin/python scripts/bench_embedder.py
    EMBEDDING_ONNX_DIR=/tmp/onnx .venv/bin/python scripts/bench_embedder.py --queries 200
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from app.config import load_settings
from app.engines.embedder import EmbedderOptions, ServingEmbedder, load_embedder, packaged_model_path
from app.engines.embedder_export import export_path
from app.engines.embedder_onnx import OnnxEncoder

REPO_ROOT = Path(__file__).resolve().parents[1]
DATASETS = REPO_ROOT.parent / "shared" / "datasets"
CONCURRENT_CALLERS = 16


IDLE_GAPS_MS = (0, 2, 8, 20)
"""Idle time before each bare pass: 0 is back to back (the floor), the others what a lone query meets."""


def evaluation_queries(limit: int) -> dict[str, list[str]]:
    """SciFact test queries (those with judgements) and LoCoMo queries, at most `limit` of each."""
    judged = {line.split("\t", 1)[0] for line in (DATASETS / "scifact" / "qrels" / "test.tsv").open(encoding="utf-8")}
    sets: dict[str, list[str]] = {}
    for name, keep in (("scifact", judged), ("locomo", None)):
        texts = []
        with (DATASETS / name / "queries.jsonl").open(encoding="utf-8") as lines:
            for line in lines:
                record = json.loads(line)
                if keep is None or record["_id"] in keep:
                    texts.append(record["text"])
        sets[name] = texts[:limit]
    return sets


def percentiles(samples_ms: list[float]) -> str:
    ordered = sorted(samples_ms)
    p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
    return f"p50 {statistics.median(ordered):6.2f} ms  p95 {p95:6.2f} ms"


async def one_at_a_time(embedder: ServingEmbedder, texts: list[str]) -> list[float]:
    samples = []
    for text in texts:
        started = time.perf_counter()
        await embedder.embed_query(text)
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def bare_passes_ms(encoder: OnnxEncoder, texts: list[str], *, gap_ms: float) -> list[float]:
    """Milliseconds of one pass per text, each after `gap_ms` of idle time (a sleep, not measured)."""
    samples = []
    for text in texts:
        time.sleep(gap_ms / 1000)
        started = time.perf_counter()
        encoder.encode([text])
        samples.append((time.perf_counter() - started) * 1000)
    return samples


async def concurrent_qps(embedder: ServingEmbedder, texts: list[str]) -> float:
    pending = list(texts)

    async def caller() -> None:
        while pending:
            await embedder.embed_query(pending.pop())

    started = time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(CONCURRENT_CALLERS)))
    return len(texts) / (time.perf_counter() - started)


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def run(arguments: argparse.Namespace) -> None:
    settings = load_settings()
    onnx_dir = settings.embedding_onnx_dir or Path(tempfile.mkdtemp(prefix="poimen-onnx-"))
    # No query-vector cache here: every call must really embed.
    onnx = load_embedder(settings.embedding_model, options=EmbedderOptions(backend="onnx", onnx_dir=onnx_dir))
    torch = load_embedder(settings.embedding_model, options=EmbedderOptions(backend="torch"))
    print(f"backends: {onnx.backend} and {torch.backend}; RSS with both loaded {rss_mib():.0f} MiB", flush=True)
    sets = evaluation_queries(arguments.queries)
    for name, texts in sets.items():
        first = np.asarray(await onnx.embed_queries(texts))
        second = np.asarray(await torch.embed_queries(texts))
        cosines = (first * second).sum(axis=1)
        print(f"agreement {name:8} {len(texts)} queries: mean cosine {cosines.mean():.7f}, min {cosines.min():.7f}")
    texts = [text for group in sets.values() for text in group]
    await one_at_a_time(onnx, texts[:20])  # warm-up
    await one_at_a_time(torch, texts[:20])
    print(f"one query  onnx  (service path)  {percentiles(await one_at_a_time(onnx, texts))}", flush=True)
    print(f"one query  torch (service path)  {percentiles(await one_at_a_time(torch, texts))}", flush=True)
    model_dir = packaged_model_path(settings.embedding_model)
    model_file = export_path(model_dir, model_name=onnx.model_name, folder=onnx_dir)
    bare = OnnxEncoder(model_file, model_dir, threads=1)
    for gap_ms in IDLE_GAPS_MS:
        samples = bare_passes_ms(bare, texts, gap_ms=gap_ms)
        print(f"one query  onnx  (bare session, 1 thread, {gap_ms:2} ms idle before each)  {percentiles(samples)}")
    for label, embedder in (("onnx", onnx), ("torch", torch)):
        qps = await concurrent_qps(embedder, texts)
        sizes = embedder.query_batches
        print(f"{CONCURRENT_CALLERS} callers {label:5} {qps:7.1f} queries/s; mean texts per pass {np.mean(sizes):.1f}")
    onnx.close()
    torch.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--queries", type=int, default=300, help="at most this many queries of each set")
    arguments = parser.parse_args()
    if not (DATASETS / "scifact").is_dir():
        print(f"no datasets under {DATASETS}", file=sys.stderr)
        return 1
    asyncio.run(run(arguments))
    return 0


if __name__ == "__main__":
    sys.exit(main())
