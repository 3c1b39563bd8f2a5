"""Latency of `GET /memory/query` per strategy on SciFact's corpus (5,183 abstracts), HTTP end to end.

What it does:
1. Uses `--data-dir` as POIMEN_DATA_DIR (a throwaway temp folder when omitted). The first run ingests
   the corpus there with `poimen ingest <corpus.jsonl> --project scifact` (minutes on a laptop CPU) and
   leaves a marker file, so later runs with the same `--data-dir` start at once.
2. Starts `poimen serve` on a free loopback port with the query cache and the query-embedding cache off
   (QUERY_CACHE_TTL_SECS=0, EMBEDDING_QUERY_CACHE_SIZE=0), so every request really embeds and searches,
   and waits for /readyz.
3. Sends the test queries (queries.jsonl restricted to the ids in qrels/test.tsv; 300 for SciFact)
   sequentially over one keep-alive connection, once per strategy, after a short warm-up.
4. Prints, per strategy, p50/p95/p99/mean end-to-end milliseconds as the client saw them, the server's
   own total, and the p50 of each stage the response reports (optimize, embed, semantic, lexical, fusion,
   rerank: 0 unless RERANKER is set, e.g. `RERANKER=learned .venv/bin/python scripts/bench_query.py ...`).

Usage:
    .venv/bin/python scripts/bench_query.py --data-dir /tmp/bench-scifact/data
    .venv/bin/python scripts/bench_query.py --data-dir DIR --strategies hybrid lexical --queries 100 --json out.json
Environment variables given to this script pass through to the server (e.g. EMBEDDING_THREADS=2).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path
from typing import Any

import loopback_service

REPOSITORY = Path(__file__).resolve().parents[1]
DEFAULT_DATASET = REPOSITORY.parent / "shared" / "datasets" / "scifact"
PROJECT = "scifact"
STRATEGIES = ("hybrid", "semantic", "lexical", "cascading")
STAGES = ("optimize", "embed", "semantic", "lexical", "fusion", "rerank")
INGESTED_MARKER = ".bench-ingested-scifact"
READY_TIMEOUT_S = 120.0
WARMUP_QUERIES = 10


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--dataset", type=Path, default=DEFAULT_DATASET, help="BEIR folder (corpus.jsonl, queries.jsonl, qrels/)"
    )
    parser.add_argument("--data-dir", type=Path, default=None, help="POIMEN_DATA_DIR to reuse (temporary when omitted)")
    parser.add_argument("--split", default="test", help="qrels split whose query ids are sent")
    parser.add_argument("--queries", type=int, default=None, help="send at most this many queries per strategy")
    parser.add_argument("--strategies", nargs="+", choices=STRATEGIES, default=list(STRATEGIES))
    parser.add_argument("--limit", type=int, default=10, help="results per query")
    parser.add_argument("--json", type=Path, default=None, help="also write the summary as JSON here")
    return parser.parse_args(argv)


def load_queries(dataset: Path, split: str, limit: int | None) -> list[str]:
    """Query texts whose ids appear in `qrels/<split>.tsv`, in qrels order."""
    wanted: list[str] = []
    with (dataset / "qrels" / f"{split}.tsv").open(encoding="utf-8") as qrels:
        for line in qrels:
            query_id = line.split("\t", 1)[0]
            if query_id and query_id != "query-id" and query_id not in wanted:
                wanted.append(query_id)
    texts: dict[str, str] = {}
    with (dataset / "queries.jsonl").open(encoding="utf-8") as queries:
        for line in queries:
            record = json.loads(line)
            texts[str(record["_id"])] = record["text"]
    selected = [texts[query_id] for query_id in wanted if query_id in texts]
    return selected[:limit] if limit else selected


def server_environment(data_dir: Path) -> dict[str, str]:
    return {
        **os.environ,
        "POIMEN_DATA_DIR": str(data_dir),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "QUERY_CACHE_TTL_SECS": "0",
        # Every strategy sends the same texts: with the query-embedding cache on, the strategies after the
        # first would read their vector from it, so their latency would leave out the embedding.
        "EMBEDDING_QUERY_CACHE_SIZE": "0",
        "LOG_LEVEL": "WARNING",
    }


def ingest_once(dataset: Path, data_dir: Path) -> None:
    marker = data_dir / INGESTED_MARKER
    if marker.exists():
        print(f"reusing the ingested corpus in {data_dir}", file=sys.stderr)
        return
    print(f"ingesting {dataset / 'corpus.jsonl'} into {data_dir} (once; reuse with --data-dir)", file=sys.stderr)
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "app", "ingest", str(dataset / "corpus.jsonl"), "--project", PROJECT],
        cwd=REPOSITORY,
        env=server_environment(data_dir),
        check=True,
    )
    marker.write_text(f"ingested in {time.perf_counter() - started:.0f} s\n", encoding="utf-8")


def start_server(
    data_dir: Path, port: int, *, environment: dict[str, str] | None = None, ready_timeout_s: float = READY_TIMEOUT_S
) -> subprocess.Popen[bytes]:
    """`poimen serve` on 127.0.0.1:`port` over `data_dir`, once `/readyz` answers 200 (`server_environment` unless given)."""
    log_path = data_dir / "bench-server.log"
    log_path.unlink(missing_ok=True)
    server = loopback_service.spawn(
        loopback_service.serve_command([sys.executable, "-m", "app"], port),
        environment=server_environment(data_dir) if environment is None else environment,
        cwd=REPOSITORY,
        log_path=log_path,
    )
    try:
        ready = loopback_service.wait_until_ready(server, port, timeout_s=ready_timeout_s)
    except TimeoutError:
        loopback_service.stop(server)
        msg = f"server not ready within {ready_timeout_s} s"
        raise RuntimeError(msg) from None
    if not ready:
        msg = f"server exited with {server.returncode}; see {log_path}"
        raise RuntimeError(msg)
    return server


def search(
    connection: http.client.HTTPConnection, query: str, *, strategy: str, limit: int, project: str = PROJECT
) -> tuple[float, dict[str, Any]]:
    """One request: (client-side milliseconds, response body)."""
    path = "/memory/query?" + urllib.parse.urlencode(
        {"query": query, "project": project, "limit": limit, "strategy": strategy}
    )
    started = time.perf_counter()
    connection.request("GET", path)
    response = connection.getresponse()
    payload = response.read()
    elapsed_ms = (time.perf_counter() - started) * 1000
    if response.status != 200:
        msg = f"{strategy} {query[:40]!r} answered {response.status}: {payload[:200]!r}"
        raise RuntimeError(msg)
    body: dict[str, Any] = json.loads(payload)
    return elapsed_ms, body


def percentiles(values: list[float]) -> dict[str, float]:
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return {
        "p50": round(statistics.median(values), 2),
        "p95": round(cuts[94], 2),
        "p99": round(cuts[98], 2),
        "mean": round(statistics.fmean(values), 2),
    }


def check_both_legs_answer(port: int, query: str) -> None:
    """Refuse to measure an index that cannot answer: an empty leg would make its latency meaningless.

    A lexical index recreated empty (say, after a schema change) is refilled by `poimen reindex`.
    """
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    for strategy, remedy in (
        ("lexical", f"run `POIMEN_DATA_DIR=DIR poimen reindex --project {PROJECT}`"),
        ("semantic", "delete the data dir's ingest marker and ingest again"),
    ):
        _, body = search(connection, query, strategy=strategy, limit=10)
        if not body["results"]:
            msg = f"the {strategy} leg returns nothing for {query[:40]!r}: {remedy}"
            raise RuntimeError(msg)
    connection.close()


def run_strategy(port: int, queries: list[str], *, strategy: str, limit: int) -> dict[str, Any]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    for query in queries[:WARMUP_QUERIES]:
        search(connection, query, strategy=strategy, limit=limit)
    client_ms: list[float] = []
    server_ms: list[float] = []
    stage_ms: dict[str, list[float]] = {stage: [] for stage in STAGES}
    degraded = 0
    result_counts: list[int] = []
    for query in queries:
        elapsed_ms, body = search(connection, query, strategy=strategy, limit=limit)
        if body["cached"]:
            msg = "a cached answer: the query cache must be off (QUERY_CACHE_TTL_SECS=0)"
            raise RuntimeError(msg)
        client_ms.append(elapsed_ms)
        metrics = body["metrics"]
        server_ms.append(metrics["total_time_ms"])
        for stage in STAGES:
            stage_ms[stage].append(metrics[f"{stage}_time_ms"])
        degraded += bool(body["degraded"])
        result_counts.append(len(body["results"]))
    connection.close()
    return {
        "strategy": strategy,
        "queries": len(queries),
        "degraded": degraded,
        "mean_results": round(statistics.fmean(result_counts), 2),
        "end_to_end_ms": percentiles(client_ms),
        "server_total_ms": percentiles(server_ms),
        "stage_p50_ms": {stage: round(statistics.median(values), 2) for stage, values in stage_ms.items()},
    }


def print_table(results: list[dict[str, Any]]) -> None:
    header = (
        f"{'strategy':<10} {'n':>4} {'hits':>5} {'p50':>7} {'p95':>7} {'p99':>7} {'mean':>7} {'server50':>8} "
        + " ".join(f"{stage:>9}" for stage in STAGES)
    )
    print("end-to-end ms (client, HTTP keep-alive), server total p50, per-stage p50 ms")
    print(header)
    for result in results:
        end_to_end = result["end_to_end_ms"]
        print(
            f"{result['strategy']:<10} {result['queries']:>4} {result['mean_results']:>5.1f} {end_to_end['p50']:>7.1f} {end_to_end['p95']:>7.1f} "
            f"{end_to_end['p99']:>7.1f} {end_to_end['mean']:>7.1f} {result['server_total_ms']['p50']:>8.1f} "
            + " ".join(f"{result['stage_p50_ms'][stage]:>9.2f}" for stage in STAGES)
            + (f"  ({result['degraded']} degraded)" if result["degraded"] else "")
        )


def main(argv: list[str] | None = None) -> int:
    arguments = parse_arguments(argv)
    queries = load_queries(arguments.dataset, arguments.split, arguments.queries)
    temporary = arguments.data_dir is None
    data_dir = Path(tempfile.mkdtemp(prefix="bench-poimen-")) if temporary else arguments.data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    server: subprocess.Popen[bytes] | None = None
    try:
        ingest_once(arguments.dataset, data_dir)
        port = loopback_service.free_port()
        server = start_server(data_dir, port)
        check_both_legs_answer(port, queries[0])
        results = [
            run_strategy(port, queries, strategy=strategy, limit=arguments.limit) for strategy in arguments.strategies
        ]
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
        if temporary:
            shutil.rmtree(data_dir, ignore_errors=True)
    print_table(results)
    # Relative to the repository: a committed result names no path of the machine that made it.
    summary = {
        "corpus": os.path.relpath(arguments.dataset, REPOSITORY),
        "cpu_count": os.cpu_count(),
        "results": results,
    }
    if arguments.json is not None:
        arguments.json.write_text(json.dumps(summary, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
