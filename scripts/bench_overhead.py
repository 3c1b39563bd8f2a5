"""Overhead of metrics + tracing on `GET /memory/query` latency: the same server with both off, then on.

Starts `poimen serve` (embedded engines) on one throwaway data folder, ingests a small SciFact slice
once, then runs the same sequential queries against servers started with METRICS_ENABLED and
TRACING_ENABLED both false and both true, both running at once on copies of the folder, each query
sent to both back to back (alternating which goes first) so machine-load drift hits both alike. The query
cache is off (QUERY_CACHE_TTL_SECS=0) so every query runs the engines. Reports p50/p95 per mode and
the p50 ratio; the target is an overhead below 5 % of p50.

    .venv/bin/python scripts/bench_overhead.py --documents 300 --queries 200 --rounds 2
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

import loopback_service

DATASET = Path(__file__).resolve().parents[1].parent / "shared" / "datasets" / "scifact"
PROJECT = "bench"
READY_WAIT_S = 180
WARMUP_QUERIES = 20
INGEST_BATCH = 50


def _request(url: str, *, body: bytes | None = None, timeout_s: float = 60) -> tuple[int, bytes]:
    request = urllib.request.Request(url, data=body, headers={"content-type": "application/json"})  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:  # noqa: S310 - loopback only
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


class Server:
    """One `poimen serve` process on a free loopback port; stopped with SIGTERM."""

    def __init__(self, data_dir: Path, *, observability: bool) -> None:
        port = loopback_service.free_port()
        self.url = f"http://127.0.0.1:{port}"
        switch = "true" if observability else "false"
        environment = {
            **os.environ,
            "POIMEN_DATA_DIR": str(data_dir),
            "HF_HUB_OFFLINE": "1",
            "METRICS_ENABLED": switch,
            "TRACING_ENABLED": switch,
            "QUERY_CACHE_TTL_SECS": "0",
            "LOG_LEVEL": "WARNING",
        }
        environment.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
        log_path = data_dir.parent / f"server-{switch}.log"
        cwd = Path.cwd()
        self._process = loopback_service.spawn(
            loopback_service.serve_command([str(Path(sys.executable).with_name("poimen"))], port),
            environment=environment,
            cwd=cwd,
            log_path=log_path,
        )
        try:
            ready = loopback_service.wait_until_ready(self._process, port, timeout_s=READY_WAIT_S, poll_interval_s=0.5)
        except TimeoutError:
            self.stop()
            msg = f"server not ready within {READY_WAIT_S} s"
            raise RuntimeError(msg) from None
        if not ready:
            msg = f"server exited with {self._process.returncode}; see {log_path}"
            raise RuntimeError(msg)

    def stop(self) -> None:
        loopback_service.stop(self._process, timeout_s=60)


def _read_jsonl(path: Path, limit: int) -> list[dict[str, str]]:
    rows = []
    with path.open() as lines:
        for line in lines:
            rows.append(json.loads(line))
            if len(rows) == limit:
                break
    return rows


def _ingest(server: Server, documents: list[dict[str, str]]) -> None:
    for start in range(0, len(documents), INGEST_BATCH):
        batch = [
            {
                "id": row["_id"],
                "source": f"scifact/{row['_id']}",
                "title": row.get("title") or row["_id"],
                "text": row["text"],
            }
            for row in documents[start : start + INGEST_BATCH]
        ]
        status, body = _request(
            f"{server.url}/v1/projects/{PROJECT}/documents", body=json.dumps({"documents": batch}).encode()
        )
        if status != 201:
            msg = f"ingest failed: {status} {body[:200]!r}"
            raise RuntimeError(msg)


def _query_url(server: Server, text: str) -> str:
    return f"{server.url}/memory/query?" + urllib.parse.urlencode({"query": text, "project": PROJECT})


def _timed_ms(url: str) -> float:
    started = time.perf_counter()
    status, _ = _request(url)
    elapsed_ms = (time.perf_counter() - started) * 1000
    if status != 200:
        msg = f"query failed with {status}"
        raise RuntimeError(msg)
    return elapsed_ms


def _paired_latencies_ms(servers: dict[str, Server], queries: list[str]) -> dict[str, list[float]]:
    """Each query on both servers back to back, alternating which goes first, so load drift hits both alike."""
    for text in queries[:WARMUP_QUERIES]:
        for server in servers.values():
            _request(_query_url(server, text))
    latencies: dict[str, list[float]] = {mode: [] for mode in servers}
    for number, text in enumerate(queries):
        order = list(servers) if number % 2 == 0 else list(reversed(servers))
        for mode in order:
            latencies[mode].append(_timed_ms(_query_url(servers[mode], text)))
    return latencies


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def main() -> int:
    """Run the benchmark and print one JSON object with p50/p95 per mode and the p50 overhead."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, default=DATASET, help="BEIR folder with corpus.jsonl, queries.jsonl")
    parser.add_argument("--documents", type=int, default=300)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=2, help="passes over the queries")
    arguments = parser.parse_args()
    documents = _read_jsonl(arguments.dataset / "corpus.jsonl", arguments.documents)
    queries = [row["text"] for row in _read_jsonl(arguments.dataset / "queries.jsonl", arguments.queries)]
    samples: dict[str, list[float]] = {"off": [], "on": []}
    with tempfile.TemporaryDirectory(prefix="poimen-bench-") as folder:
        data_dir = Path(folder) / "data"
        server = Server(data_dir, observability=False)
        try:
            _ingest(server, documents)
            time.sleep(2)  # the outbox indexes the lexical leg in the background
        finally:
            server.stop()
        # Two copies of the ingested folder (`cp -a` keeps the embedded server's owner), one per mode.
        folders = {mode: Path(folder) / mode for mode in ("off", "on")}
        for copy in folders.values():
            subprocess.run(["cp", "-a", str(data_dir), str(copy)], check=True)
        servers: dict[str, Server] = {}
        try:
            for mode, copy in folders.items():
                servers[mode] = Server(copy, observability=mode == "on")
            for _ in range(arguments.rounds):
                for mode, values in _paired_latencies_ms(servers, queries).items():
                    samples[mode].extend(values)
        finally:
            for server in servers.values():
                server.stop()
    p50 = {mode: statistics.median(values) for mode, values in samples.items()}
    report = {
        "documents": len(documents),
        "queries_per_round": len(queries),
        "rounds": arguments.rounds,
        "p50_ms": {mode: round(value, 3) for mode, value in p50.items()},
        "p95_ms": {mode: round(_percentile(values, 0.95), 3) for mode, values in samples.items()},
        "p50_overhead_percent": round(100 * (p50["on"] - p50["off"]) / p50["off"], 2),
        "median_paired_difference_ms": round(
            statistics.median(on - off for on, off in zip(samples["on"], samples["off"], strict=True)), 3
        ),
        "target_percent": 5.0,
    }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
