"""Overload: the sustainable query rate, then 4x that rate open loop against a bounded service.

What it does, against its own `poimen serve` (embedded engines, temp data folder, loopback, cache off,
MAX_CONCURRENT_REQUESTS=`--max-concurrent`):
1. Ingests `--documents` SciFact abstracts over HTTP and waits for the lexical index.
2. Sustainable rate: closed-loop hybrid searches at `--saturation-concurrency` clients (below the
   limit, so nothing is shed) for `--probe-s` seconds; its QPS is what the service can sustain. An
   open-loop run at that rate confirms it (served QPS, p95, shed).
3. Overload: open loop at `--factor` (4) times that rate for `--overload-s` seconds, on distinct texts,
   sampling the server's RSS every second. Latency counts from when each request was due.
4. Reports served QPS, shed rate (503/429 with Retry-After), p95 of served requests, other 5xx,
   transport errors, the `poimen_requests_shed_total` delta from /metrics, and RSS before, peak and
   after; writes `<output>.json` and `<output>.md`.

The client runs on the same cores as the server: at high offered rates it competes for them, and a
request it could not even start on time is still counted late (open loop), never dropped from the stats.

    .venv/bin/python scripts/bench_overload.py
    .venv/bin/python scripts/bench_overload.py --probe-s 5 --overload-s 10 --documents 300 \\
        --label "smoke run" --output docs/benchmarks/overload-smoke
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
import sys
from pathlib import Path
from typing import Any

from load_server import (
    ServiceUnderTest,
    ingest_documents,
    machine_description,
    machine_line,
    rss_bytes,
    run_benchmark,
    scrape_metrics,
    wait_for_lexical_index,
)
from loadgen import (
    QueryCursor,
    SearchLoad,
    SearchTarget,
    closed_loop,
    corpus_documents,
    load_query_texts,
    markdown_table,
    new_search_client,
    open_loop,
    ratio,
    verdict,
)

PROJECT = "overload"
INGEST_BATCH_DOCUMENTS = 50
LEXICAL_WAIT_S = 900.0
RSS_SAMPLE_INTERVAL_S = 1.0
OPEN_LOOP_CONNECTIONS = 512  # above any realistic in-flight limit: the service, not the client pool, must shed
SHED_METRIC = 'poimen_requests_shed_total{reason="overload"}'
TARGET_SERVED_FRACTION = 0.8  # "keeps serving its sustainable rate": at least this share of it under 4x
TARGET_P95_FACTOR = 3.0  # "bounded p95": served p95 under 4x at most this many times the sustainable p95


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--documents", type=int, default=1000)
    parser.add_argument("--max-concurrent", type=int, default=32, help="MAX_CONCURRENT_REQUESTS of the service")
    parser.add_argument("--saturation-concurrency", type=int, default=16)
    parser.add_argument("--probe-s", type=float, default=30.0, help="seconds of the closed and open sustainable runs")
    parser.add_argument("--overload-s", type=float, default=60.0)
    parser.add_argument("--factor", type=float, default=4.0, help="overload rate = factor x sustainable QPS")
    parser.add_argument("--output", type=Path, default=Path("docs/benchmarks/overload"), help="no suffix")
    parser.add_argument("--label", default="full run")
    return parser.parse_args(argv)


async def sample_rss(pid: int, samples: list[int], stop: asyncio.Event) -> None:
    """Append the server's RSS every `RSS_SAMPLE_INTERVAL_S` until `stop` is set."""
    while not stop.is_set():
        samples.append(rss_bytes(pid))
        try:
            await asyncio.wait_for(stop.wait(), timeout=RSS_SAMPLE_INTERVAL_S)
        except TimeoutError:
            continue


async def measure(arguments: argparse.Namespace, data_dir: Path) -> dict[str, Any]:
    cursor = QueryCursor(load_query_texts())
    environment = {"QUERY_CACHE_TTL_SECS": "0", "MAX_CONCURRENT_REQUESTS": str(arguments.max_concurrent)}
    with ServiceUnderTest(data_dir, environment=environment) as service:
        seed = corpus_documents()[: arguments.documents]
        # In a thread: the event loop stays free, so Ctrl-C cancels and the service is stopped.
        await asyncio.to_thread(ingest_documents, service.url, PROJECT, seed, batch_size=INGEST_BATCH_DOCUMENTS)
        await asyncio.to_thread(wait_for_lexical_index, service.url, PROJECT, timeout_s=LEXICAL_WAIT_S)
        async with new_search_client(service.url, connections=OPEN_LOOP_CONNECTIONS) as client:
            load = SearchLoad(client, SearchTarget(PROJECT, "hybrid"), cursor.next_text)
            await closed_loop(load, concurrency=1, duration_s=2.0)  # warm-up: first queries pay for lazy loading
            saturated = await closed_loop(
                load, concurrency=arguments.saturation_concurrency, duration_s=arguments.probe_s
            )
            sustainable_qps = saturated["qps"]
            print(f"closed loop at {arguments.saturation_concurrency} clients: {sustainable_qps} QPS", flush=True)
            at_sustainable = await open_loop(load, rate_per_s=sustainable_qps, duration_s=arguments.probe_s)
            print(f"open loop at {sustainable_qps}/s: {at_sustainable}", flush=True)
            rss_before = rss_bytes(service.pid)
            shed_before = scrape_metrics(service.url).get(SHED_METRIC, 0.0)
            rss_samples: list[int] = []
            stop = asyncio.Event()
            sampler = asyncio.create_task(sample_rss(service.pid, rss_samples, stop))
            overloaded = await open_loop(
                load, rate_per_s=arguments.factor * sustainable_qps, duration_s=arguments.overload_s
            )
            stop.set()
            await sampler
            print(f"open loop at {arguments.factor}x: {overloaded}", flush=True)
            shed_counted = scrape_metrics(service.url).get(SHED_METRIC, 0.0) - shed_before
            rss_after = rss_bytes(service.pid)
    mib = 2**20
    return {
        "label": arguments.label,
        "command": "scripts/bench_overload.py " + shlex.join(sys.argv[1:]),
        "machine": machine_description(),
        "documents": arguments.documents,
        "max_concurrent_requests": arguments.max_concurrent,
        "saturation_closed_loop": saturated,
        "sustainable_qps": sustainable_qps,
        "open_loop_at_sustainable": at_sustainable,
        "factor": arguments.factor,
        "open_loop_overloaded": overloaded,
        "shed_metric_delta": shed_counted,
        "rss_mib": {
            "before": round(rss_before / mib, 1),
            "peak": round(max(rss_samples, default=rss_before) / mib, 1),
            "after": round(rss_after / mib, 1),
        },
        "targets": evaluate_targets(sustainable_qps, at_sustainable, overloaded),
    }


def evaluate_targets(
    sustainable_qps: float, at_sustainable: dict[str, Any], overloaded: dict[str, Any]
) -> list[dict[str, Any]]:
    served_fraction = ratio(overloaded["qps"], sustainable_qps)
    p95_factor = ratio(overloaded["p95_ms"], at_sustainable["p95_ms"])
    return [
        {
            "target": f"serves >= {TARGET_SERVED_FRACTION:.0%} of the sustainable rate under overload",
            "measured": f"{overloaded['qps']} of {sustainable_qps} QPS ({served_fraction}x)",
            "holds": served_fraction >= TARGET_SERVED_FRACTION,
        },
        {
            "target": f"served p95 under overload <= {TARGET_P95_FACTOR:g}x the p95 at the sustainable rate",
            "measured": f"{overloaded['p95_ms']} vs {at_sustainable['p95_ms']} ms ({p95_factor}x)",
            "holds": p95_factor <= TARGET_P95_FACTOR,
        },
        {
            "target": "the rest is shed with Retry-After (503/429), no other 5xx, no transport errors",
            "measured": f"shed {overloaded['shed']} ({overloaded['shed_rate']:.1%}), other 5xx "
            f"{overloaded['other_5xx']}, transport errors {overloaded['transport_errors']}",
            "holds": overloaded["other_5xx"] == 0 and overloaded["transport_errors"] == 0,
        },
    ]


def render_markdown(summary: dict[str, Any]) -> str:
    rows = []
    for name, run in (
        (f"closed loop, {summary['saturation_closed_loop']['concurrency']} clients", summary["saturation_closed_loop"]),
        (f"open loop at {summary['sustainable_qps']}/s (sustainable)", summary["open_loop_at_sustainable"]),
        (f"open loop at {summary['factor']:g}x", summary["open_loop_overloaded"]),
    ):
        offered = run.get("offered_qps", "-")
        rows.append(
            [
                name,
                offered,
                run["qps"],
                run["p50_ms"],
                run["p95_ms"],
                run["p99_ms"],
                f"{run['shed']} ({run['shed_rate']:.1%})",
                run["other_5xx"],
                run["transport_errors"],
                run["sent"],
            ]
        )
    rss = summary["rss_mib"]
    return "\n".join(
        [
            f"# Overload: {summary['label']}\n",
            f"Command: `{summary['command']}`  ",
            machine_line(summary["machine"]),
            (
                f"Service: hybrid search, cache off, MAX_CONCURRENT_REQUESTS={summary['max_concurrent_requests']}, "
                f"{summary['documents']} SciFact abstracts. Open-loop latency counts from when a request was due.\n"
            ),
            "## Targets\n",
            markdown_table(
                ["target", "measured", "verdict"],
                [[t["target"], t["measured"], verdict(holds=t["holds"])] for t in summary["targets"]],
            ),
            "## Runs\n",
            markdown_table(
                ["run", "offered/s", "served QPS", "p50", "p95", "p99", "shed", "other 5xx", "transport", "sent"],
                rows,
            ),
            (
                f'`poimen_requests_shed_total{{reason="overload"}}` rose by {summary["shed_metric_delta"]:.0f} '
                "during the overload run.  "
            ),
            f"Server RSS: {rss['before']} MiB before, {rss['peak']} MiB peak, {rss['after']} MiB after.\n",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    arguments = parse_arguments(argv)
    return run_benchmark(
        lambda data_dir: measure(arguments, data_dir),
        output=arguments.output,
        data_dir_prefix="bench-overload-",
        render_markdown=render_markdown,
    )


if __name__ == "__main__":
    sys.exit(main())
