"""Peak server memory of N concurrent maximal `POST /v1/search/batch` requests on a real `poimen serve`.

What it does:
1. Ingests the first `--documents` SciFact abstracts into `--data-dir` once (`poimen ingest`; a marker
   file lets later runs reuse it).
2. For each N of `--concurrency`: starts a fresh `poimen serve` on a loopback port (query and
   query-vector caches off, leg deadlines raised, so every query is analysed, embedded and searched in
   full), sends one such batch with `limit` 1 and no `explain` to warm it (analysis, ONNX arenas,
   first-use allocations), resets the peak RSS (`/proc/<pid>/clear_refs` 5), then sends N maximal
   batches at once and reads `VmHWM` from `/proc/<pid>/status`.
   A maximal batch: `--queries` queries of `--chars` characters of abstract prose (distinct per request),
   `limit` `--limit`, `explain` on (the options are flags, so each part can be left out to see its share).
3. Prints one JSON line per N: RSS when ready and before the N batches, peak, peak over before, per
   batch, response sizes.

Usage:
    .venv/bin/python scripts/probe_search_memory.py --data-dir /tmp/probe-search/data --concurrency 1 4 8
    .venv/bin/python scripts/probe_search_memory.py --data-dir DIR --concurrency 8 --no-explain --limit 10
Environment variables given to this script pass through to the server (e.g. EMBEDDING_THREADS=2).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import loopback_service
from bench_query import server_environment
from bench_query import start_server as start_bench_server

REPOSITORY = Path(__file__).resolve().parents[1]
DEFAULT_DATASET = REPOSITORY.parent / "shared" / "datasets" / "scifact"
PROJECT = "scifact"
READY_TIMEOUT_S = 180.0
MIB = 1024 * 1024


def parse_arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--dataset", type=Path, default=DEFAULT_DATASET)
    parser.add_argument("--documents", type=int, default=300)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--queries", type=int, default=32)
    parser.add_argument("--chars", type=int, default=8000)
    parser.add_argument("--limit", type=int, default=100)
    parser.add_argument("--no-explain", action="store_true")
    return parser.parse_args()


def environment(data_dir: Path) -> dict[str, str]:
    """`bench_query`'s server environment (caches off, offline), with the legs' deadlines raised.

    On a small shared machine N concurrent batches run past the legs' deadlines; a degraded (or 503) answer
    holds fewer hits, so the deadlines are raised to measure whole answers.
    """
    return {
        **server_environment(data_dir),
        "LEXICAL_TIMEOUT_MS": os.environ.get("LEXICAL_TIMEOUT_MS", "120000"),
        "SEMANTIC_TIMEOUT_MS": os.environ.get("SEMANTIC_TIMEOUT_MS", "120000"),
    }


def abstracts(dataset: Path) -> list[dict[str, Any]]:
    with (dataset / "corpus.jsonl").open(encoding="utf-8") as corpus:
        return [json.loads(line) for line in corpus]


def ingest_once(records: list[dict[str, Any]], data_dir: Path, documents: int) -> None:
    marker = data_dir / f".probe-ingested-{documents}"
    if marker.exists():
        return
    data_dir.mkdir(parents=True, exist_ok=True)
    subset = data_dir / "probe-corpus.jsonl"
    subset.write_text("".join(json.dumps(record) + "\n" for record in records[:documents]), encoding="utf-8")
    command = [sys.executable, "-m", "app", "ingest", str(subset), "--project", PROJECT]
    subprocess.run(command, cwd=REPOSITORY, env=environment(data_dir), check=True)
    marker.write_text("ingested\n", encoding="utf-8")


def start_server(data_dir: Path) -> tuple[subprocess.Popen[bytes], int]:
    """`bench_query`'s server start (its log `bench-server.log` in `data_dir`) with this probe's environment."""
    port = loopback_service.free_port()
    return start_bench_server(data_dir, port, environment=environment(data_dir), ready_timeout_s=READY_TIMEOUT_S), port


def status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text(encoding="utf-8").splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    msg = f"no {field} in /proc/{pid}/status"
    raise RuntimeError(msg)


def batch_body(texts: list[str], arguments: argparse.Namespace) -> bytes:
    queries = [{"query": text, "limit": arguments.limit, "explain": not arguments.no_explain} for text in texts]
    return json.dumps({"project": PROJECT, "queries": queries}).encode()


def query_texts(records: list[dict[str, Any]], start: int, arguments: argparse.Namespace) -> list[str]:
    """`--queries` texts of `--chars` characters, from abstracts from `start` on (so each batch is new)."""
    texts, position = [], start
    for _ in range(arguments.queries):
        text = ""
        while len(text) < arguments.chars:
            text += records[position % len(records)]["text"] + " "
            position += 1
        texts.append(text[: arguments.chars])
    return texts


def post(port: int, body: bytes) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    connection.request("POST", "/v1/search/batch", body=body, headers={"Content-Type": "application/json"})
    response = connection.getresponse()
    payload = response.read()
    if response.status != 200:
        msg = f"batch answered {response.status}: {payload[:300]!r}"
        raise RuntimeError(msg)
    return len(payload)


def run(records: list[dict[str, Any]], concurrency: int, arguments: argparse.Namespace) -> dict[str, Any]:
    server, port = start_server(arguments.data_dir)
    try:
        ready = status_kib(server.pid, "VmRSS")
        # Warm-up: the same work up to the hits (analysis, one embedding batch of long texts: ONNX arenas).
        warm = argparse.Namespace(**{**vars(arguments), "limit": 1, "no_explain": True})
        post(port, batch_body(query_texts(records, 0, arguments), warm))
        time.sleep(1)
        Path(f"/proc/{server.pid}/clear_refs").write_text("5", encoding="utf-8")  # resets VmHWM
        before = status_kib(server.pid, "VmRSS")
        bodies = [batch_body(query_texts(records, 1000 * (i + 1), arguments), arguments) for i in range(concurrency)]
        sizes: list[int] = []
        threads = [threading.Thread(target=lambda b=body: sizes.append(post(port, b))) for body in bodies]
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        seconds = time.perf_counter() - started
        peak = status_kib(server.pid, "VmHWM")
    finally:
        server.terminate()
        server.wait(timeout=60)
    return {
        "concurrency": concurrency,
        "queries": arguments.queries,
        "chars": arguments.chars,
        "limit": arguments.limit,
        "explain": not arguments.no_explain,
        "rss_ready_mib": round(ready / 1024),
        "rss_before_mib": round(before / 1024),
        "peak_mib": round(peak / 1024),
        "peak_over_before_mib": round((peak - before) / 1024, 1),
        "per_batch_mib": round((peak - before) / 1024 / concurrency, 1),
        "response_mb": [round(size / 1e6, 2) for size in sizes],
        "seconds": round(seconds, 1),
    }


def main() -> int:
    arguments = parse_arguments()
    records = abstracts(arguments.dataset)
    ingest_once(records, arguments.data_dir, arguments.documents)
    for concurrency in arguments.concurrency:
        print(json.dumps(run(records, concurrency, arguments)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
