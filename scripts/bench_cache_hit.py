"""Server time of a query-cache hit, which now reads the project's generation from PostgreSQL per query.

Against a running service (`poimen serve`): ingests one document, asks one query `--repeat` times,
and prints p50/p95 of `metrics.total_time_ms` for the cached answers (server time, no network), plus
the client-side round trip for comparison.

    .venv/bin/python scripts/bench_cache_hit.py --url http://127.0.0.1:8080 --repeat 500
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import httpx


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="http://127.0.0.1:8080")
    parser.add_argument("--project", default="bench-cache")
    parser.add_argument("--repeat", type=int, default=500)
    arguments = parser.parse_args()
    document = {"id": "note", "title": "Backups", "text": "The nightly backup of the billing cluster runs at 02:00."}
    with httpx.Client(base_url=arguments.url, timeout=30.0) as client:
        client.post(f"/v1/projects/{arguments.project}/documents", json=document).raise_for_status()
        params = {"query": "when does the billing backup run", "project": arguments.project}
        client.get("/memory/query", params=params).raise_for_status()  # fills the cache
        server_ms, round_trip_ms = [], []
        for _ in range(arguments.repeat):
            started = time.perf_counter()
            answer = client.get("/memory/query", params=params).json()
            round_trip_ms.append((time.perf_counter() - started) * 1000)
            if answer["cached"]:
                server_ms.append(answer["metrics"]["total_time_ms"])
    quantile = lambda values, q: statistics.quantiles(values, n=100)[q - 1]  # noqa: E731
    print(
        json.dumps(
            {
                "cached_answers": len(server_ms),
                "server_ms_p50": round(statistics.median(server_ms), 3),
                "server_ms_p95": round(quantile(server_ms, 95), 3),
                "round_trip_ms_p50": round(statistics.median(round_trip_ms), 3),
            }
        )
    )


if __name__ == "__main__":
    main()
