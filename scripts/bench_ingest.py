"""Ingest throughput on a BEIR corpus: the whole pipeline against the bare model, in one run.

Measures, on the same documents:
  bare/chunks  the model alone on exactly the texts the pipeline embeds (`embedding_text` of each chunk)
  bare/docs    the model alone on title + text per document (how BEIR embeds a corpus)
  pipeline     IngestionPipeline on embedded PostgreSQL (fresh data folder), the lexical outbox running
               in the background as in `poimen serve`, timed until the outbox has drained into tantivy
and prints documents/s, chunks/s, the ratio pipeline/bare (target >= 0.8) and peak memory.

    .venv/bin/python scripts/bench_ingest.py --limit 1000
    CHUNK_MAX_CHARS=1000 .venv/bin/python scripts/bench_ingest.py   # settings come from the environment

The corpus is read where it lies (default ../shared/datasets/scifact/corpus.jsonl); nothing is copied.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import sys
import tempfile
import time
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

from app.config import load_settings
from app.ingestion.chunking import ChunkingPolicy
from app.ingestion.content_hashes import embedding_text
from app.ingestion.outbox import OutboxWorker
from app.ingestion.pipeline import IngestionPipeline
from app.ingestion.sources import read_beir_corpus
from app.wiring.engines import open_engines

# app.engines.embedder switches Hugging Face to offline mode when it is imported: no hub access.
REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CORPUS = REPO_ROOT.parent / "shared" / "datasets" / "scifact" / "corpus.jsonl"
PROJECT = "bench"


@dataclass(frozen=True)
class Measure:
    name: str
    seconds: float
    documents: int
    chunks: int

    def line(self) -> str:
        return (
            f"{self.name:<14} {self.seconds:8.1f} s  {self.documents / self.seconds:8.1f} docs/s"
            f"  {self.chunks / self.seconds:8.1f} chunks/s"
        )


def rss_mib() -> tuple[float, float]:
    """(current, peak) resident memory of this process in MiB."""
    current = 0.0
    with Path("/proc/self/status").open() as status:
        for line in status:
            if line.startswith("VmRSS:"):
                current = int(line.split()[1]) / 1024
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return current, peak


async def run(arguments: argparse.Namespace) -> None:
    documents = list(islice(read_beir_corpus(arguments.corpus, project_id=PROJECT), arguments.limit))
    with tempfile.TemporaryDirectory(prefix="poimen-bench-") as data_dir:
        settings = load_settings().model_copy(update={"poimen_data_dir": Path(data_dir), "database_url": None})
        policy = ChunkingPolicy.from_settings(settings)
        print(
            f"{len(documents)} documents of {arguments.corpus_shown};"
            f" CHUNK_MAX_CHARS={policy.max_chars}"
            f" overlap={policy.overlap_chars} min={policy.min_chars}; model {settings.embedding_model},"
            f" EMBEDDING_BATCH_SIZE={settings.embedding_batch_size}; ingest batch {arguments.batch_size} documents;"
            f" {os.cpu_count()} CPUs",
            flush=True,
        )
        async with open_engines(settings) as engines:
            pipeline = IngestionPipeline(store=engines.store, embedder=engines.embedder, policy=policy)
            chunk_texts = [embedding_text(chunk) for document in documents for chunk in pipeline.chunk(document)]
            document_texts = [f"{document.title}\n{document.text}" for document in documents]
            encode = engines.embedder.encode  # type: ignore[attr-defined]

            started = time.perf_counter()
            encode(chunk_texts)
            bare_chunks = Measure("bare/chunks", time.perf_counter() - started, len(documents), len(chunk_texts))
            print(bare_chunks.line(), flush=True)
            started = time.perf_counter()
            encode(document_texts)
            bare_documents = Measure("bare/docs", time.perf_counter() - started, len(documents), len(document_texts))
            print(bare_documents.line(), flush=True)

            worker = OutboxWorker.from_settings(settings, store=engines.store, lexical=engines.lexical)
            started = time.perf_counter()
            worker.start()
            chunks = 0
            remaining = iter(documents)
            while batch := list(islice(remaining, arguments.batch_size)):
                outcomes = await pipeline.ingest(batch)
                chunks += sum(outcome.chunk_count for outcome in outcomes)
                worker.wake()
            ingested_s = time.perf_counter() - started
            await worker.stop()
            await worker.drain(timeout_s=600.0)
            whole = Measure("pipeline", time.perf_counter() - started, len(documents), chunks)
            print(whole.line() + f"  (PostgreSQL committed at {ingested_s:.1f} s, outbox drained after)")
        current, peak = rss_mib()
        ratio = whole.documents / whole.seconds / (bare_chunks.documents / bare_chunks.seconds)
        print(
            f"ratio pipeline/bare(same chunk texts) = {ratio:.2f} (target >= 0.8);"
            f" pipeline/bare(title+text) = {whole.seconds and bare_documents.seconds / whole.seconds:.2f}"
        )
        print(f"memory: RSS {current:.0f} MiB, peak {peak:.0f} MiB (this process; PostgreSQL runs apart)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="a BEIR corpus.jsonl")
    parser.add_argument("--limit", type=int, default=None, help="first N documents only (default: all)")
    parser.add_argument("--batch-size", type=int, default=64, help="documents per ingest call (as `poimen ingest`)")
    arguments = parser.parse_args()
    # Relative to the repository: a committed result names no path of the machine that made it.
    arguments.corpus_shown = os.path.relpath(arguments.corpus, REPO_ROOT)
    if not arguments.corpus.is_file():
        print(f"no corpus at {arguments.corpus}", file=sys.stderr)
        return 1
    asyncio.run(run(arguments))
    return 0


if __name__ == "__main__":
    sys.exit(main())
