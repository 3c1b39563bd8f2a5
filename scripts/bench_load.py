"""Load benchmark of `GET /memory/query`: closed-loop clients per strategy, cache off and on, and during a bulk ingest.

What it does, against its own `poimen serve` (embedded engines, temp data folder, loopback):
1. Ingests `--documents` SciFact abstracts over HTTP and waits until the lexical index has them all.
2. Cache off (QUERY_CACHE_TTL_SECS=0): for each strategy and each concurrency, `--cell-s` seconds of
   closed-loop clients on distinct query texts (each text is sent once in the whole run until the pool
   of ~12,000 wraps; the report says if it did).
3. Mixed: hybrid at `--mixed-concurrency` clients idle, then again while `--mixed-documents` more
   abstracts are ingested in batches over HTTP; the ratio of the two p95s.
4. Cache on (restart with QUERY_CACHE_TTL_SECS=3600): the same matrix on `--cache-queries` texts asked
   over and over (after one warming pass), so nearly every answer is a cache hit; the server time of hits.
5. Prints a table and writes `<output>.json` and `<output>.md` with the machine, the targets and verdicts.

    .venv/bin/python scripts/bench_load.py                     # the full run (~15 min on 2 quiet cores)
    .venv/bin/python scripts/bench_load.py --cell-s 5 --documents 300 --mixed-documents 100 \\
        --label "smoke run" --output docs/benchmarks/load-smoke   # a quick check of the script
"""

from __future__ import annotations

import argparse
import asyncio
import math
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from load_server import (
    CpuMeter,
    ServiceUnderTest,
    ingest_documents,
    machine_description,
    machine_line,
    rss_bytes,
    run_benchmark,
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
    ratio,
    verdict,
)

PROJECT = "load"
STRATEGIES = ("hybrid", "semantic", "lexical", "cascading")
CACHE_ON_TTL_S = "3600"
INGEST_BATCH_DOCUMENTS = 50
LEXICAL_WAIT_S = 900.0
WARMUP_QUERIES = 20
TARGET_QPS_AT_16 = 150.0
TARGET_P95_AT_16_MS = 150.0
TARGET_INGEST_P95_RATIO = 2.0
TARGET_CACHE_HIT_P50_MS = 1.0
TARGET_HYBRID_OVER_LEG_P95 = 1.15


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--documents", type=int, default=1000, help="SciFact abstracts ingested before measuring")
    parser.add_argument("--cell-s", type=float, default=20.0, help="seconds of load per strategy x concurrency")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16, 64])
    parser.add_argument("--strategies", nargs="+", choices=STRATEGIES, default=list(STRATEGIES))
    parser.add_argument("--mixed-documents", type=int, default=400, help="abstracts ingested during the mixed run")
    parser.add_argument("--mixed-concurrency", type=int, default=4)
    parser.add_argument("--cache-queries", type=int, default=50, help="distinct texts the cache-on cells repeat")
    parser.add_argument("--output", type=Path, default=Path("docs/benchmarks/load"), help="report path, no suffix")
    parser.add_argument("--label", default="full run", help="what kind of run this is, printed in the report")
    return parser.parse_args(argv)


async def warm_up(url: str, cursor: QueryCursor, strategies: list[str]) -> None:
    """A few queries per strategy first: the first ones pay for lazy loading, not for searching."""
    async with new_search_client(url, connections=1) as client:
        for strategy in strategies:
            for _ in range(WARMUP_QUERIES // len(strategies) + 1):
                params = {"query": cursor.next_text(), "project": PROJECT, "strategy": strategy}
                await client.get("/memory/query", params=params)


def check_both_legs_answer(url: str, text: str) -> None:
    """Refuse to measure a leg that returns nothing: its latency would mean nothing."""
    for strategy in ("lexical", "semantic"):
        body = httpx.get(
            f"{url}/memory/query", params={"query": text, "project": PROJECT, "strategy": strategy}, timeout=60
        ).json()
        if not body.get("results"):
            msg = f"the {strategy} leg returns nothing for {text!r}"
            raise RuntimeError(msg)


async def run_matrix(
    service: ServiceUnderTest, cursor: QueryCursor, arguments: argparse.Namespace, *, cache: str
) -> list[dict[str, Any]]:
    """Every strategy x concurrency cell, closed loop, `arguments.cell_s` seconds each, with its CPU per query."""
    cells = []
    meter = CpuMeter(service)
    async with new_search_client(service.url, connections=max(arguments.concurrency)) as client:
        for strategy in arguments.strategies:
            for concurrency in arguments.concurrency:
                load = SearchLoad(client, SearchTarget(PROJECT, strategy), cursor.next_text)
                meter.start()
                result = await closed_loop(load, concurrency=concurrency, duration_s=arguments.cell_s)
                cpu = meter.per_query_ms(result["ok"])
                cells.append({"cache": cache, "strategy": strategy, **result, **cpu})
                print(
                    f"cache {cache:<3} {strategy:<9} c={concurrency:<3} qps {result['qps']:>7.1f}  "
                    f"p50 {result['p50_ms']:>7.1f}  p95 {result['p95_ms']:>7.1f}  p99 {result['p99_ms']:>7.1f} ms  "
                    f"ok {result['ok']}/{result['sent']}  cached {result['cached']}  degraded {result['degraded']}  "
                    f"cpu ms/query server {cpu.get('server_cpu_ms_per_query')} "
                    f"postgres {cpu.get('postgres_cpu_ms_per_query')} client {cpu.get('client_cpu_ms_per_query')}",
                    flush=True,
                )
    return cells


async def run_mixed(
    url: str, cursor: QueryCursor, documents: list[dict[str, Any]], *, concurrency: int, idle_s: float
) -> dict[str, Any]:
    """Hybrid at `concurrency` idle, then for as long as the bulk ingest of `documents` takes."""
    async with new_search_client(url, connections=concurrency) as client:
        load = SearchLoad(client, SearchTarget(PROJECT, "hybrid"), cursor.next_text)
        idle = await closed_loop(load, concurrency=concurrency, duration_s=idle_s)
        started = time.perf_counter()
        ingest = asyncio.create_task(
            asyncio.to_thread(ingest_documents, url, PROJECT, documents, batch_size=INGEST_BATCH_DOCUMENTS)
        )
        busy = await closed_loop(load, concurrency=concurrency, duration_s=math.inf, until=ingest.done)
        batches = await ingest
        ingest_s = time.perf_counter() - started
    return {
        "concurrency": concurrency,
        "idle": idle,
        "during_ingest": busy,
        "ingested_documents": len(documents),
        "ingest_s": round(ingest_s, 1),
        "ingest_documents_per_s": round(len(documents) / ingest_s, 1),
        **batches,
        "p95_ratio": ratio(busy["p95_ms"], idle["p95_ms"]),
    }


def cell(cells: list[dict[str, Any]], *, cache: str, strategy: str, concurrency: int) -> dict[str, Any] | None:
    return next(
        (c for c in cells if (c["cache"], c["strategy"], c["concurrency"]) == (cache, strategy, concurrency)), None
    )


def evaluate_targets(cells: list[dict[str, Any]], mixed: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Each target of the performance issue with the measured value and whether it holds."""
    targets: list[dict[str, Any]] = []
    at_16 = cell(cells, cache="off", strategy="hybrid", concurrency=16)
    targets.append(
        {
            "target": f"hybrid QPS at 16 clients >= {TARGET_QPS_AT_16:.0f} with p95 <= {TARGET_P95_AT_16_MS:.0f} ms",
            "measured": f"{at_16['qps']} QPS, p95 {at_16['p95_ms']} ms" if at_16 else "not run",
            "holds": None
            if at_16 is None
            else at_16["qps"] >= TARGET_QPS_AT_16 and at_16["p95_ms"] <= TARGET_P95_AT_16_MS,
        }
    )
    targets.append(
        {
            "target": f"query p95 during a bulk ingest <= {TARGET_INGEST_P95_RATIO:g}x idle p95",
            "measured": f"{mixed['p95_ratio']}x ({mixed['during_ingest']['p95_ms']} / {mixed['idle']['p95_ms']} ms)"
            if mixed
            else "not run",
            "holds": None if mixed is None else mixed["p95_ratio"] <= TARGET_INGEST_P95_RATIO,
        }
    )
    hit = cell(cells, cache="on", strategy="hybrid", concurrency=1)
    targets.append(
        {
            "target": f"cache hit p50 <= {TARGET_CACHE_HIT_P50_MS:g} ms server time (hybrid, 1 client)",
            "measured": f"{hit['cached_server_p50_ms']} ms over {hit['cached']} hits" if hit else "not run",
            "holds": None if hit is None else hit["cached_server_p50_ms"] <= TARGET_CACHE_HIT_P50_MS,
        }
    )
    for concurrency in sorted({c["concurrency"] for c in cells}):
        hybrid = cell(cells, cache="off", strategy="hybrid", concurrency=concurrency)
        legs = [cell(cells, cache="off", strategy=s, concurrency=concurrency) for s in ("semantic", "lexical")]
        if hybrid is None or None in legs:
            continue
        slower = max(leg["p95_ms"] for leg in legs if leg is not None)
        measured = ratio(hybrid["p95_ms"], slower)
        targets.append(
            {
                "target": f"hybrid p95 <= {TARGET_HYBRID_OVER_LEG_P95}x the slower leg's p95 ({concurrency} clients)",
                "measured": f"{measured}x ({hybrid['p95_ms']} / {slower} ms)",
                "holds": measured <= TARGET_HYBRID_OVER_LEG_P95,
            }
        )
    return targets


def render_markdown(summary: dict[str, Any]) -> str:
    machine = summary["machine"]
    lines = [
        f"# Load benchmark: {summary['label']}\n",
        f"Command: `{summary['command']}`  ",
        machine_line(machine),
        (
            f"Corpus: {summary['documents']} SciFact abstracts (project `{PROJECT}`); {summary['cell_s']} s per cell; "
            f"{summary['distinct_queries']} distinct query texts, wrapped {summary['query_pool_wrapped']} times.\n"
        ),
        "## Targets\n",
        markdown_table(
            ["target", "measured", "verdict"],
            [[t["target"], t["measured"], verdict(holds=t["holds"])] for t in summary["targets"]],
        ),
        "## Closed loop, per strategy and concurrency\n",
        (
            "Client-side milliseconds of answered (200) requests; `server p50` is the response's `metrics.total_time_ms`; "
            "`5xx` counts answers that failed after the work started (a 503 when both legs failed or ran late), "
            "not shedding. Cache-on cells repeat a few texts on purpose. `CPU ms/q`: CPU milliseconds per answered "
            "query of the server process, its PostgreSQL (all its processes) and the load client, read from `/proc` "
            "around the cell; on 2 shared cores their sum bounds the QPS.\n"
        ),
        markdown_table(
            [
                "cache",
                "strategy",
                "clients",
                "QPS",
                "p50",
                "p95",
                "p99",
                "server p50",
                "hit p50",
                "ok/sent",
                "degraded",
                "5xx",
                "CPU ms/q server / PG / client",
            ],
            [
                [
                    c["cache"],
                    c["strategy"],
                    c["concurrency"],
                    c["qps"],
                    c["p50_ms"],
                    c["p95_ms"],
                    c["p99_ms"],
                    c["server_p50_ms"],
                    c["cached_server_p50_ms"],
                    f"{c['ok']}/{c['sent']}",
                    c["degraded"],
                    c["other_5xx"],
                    " / ".join(
                        str(c.get(key, "-"))
                        for key in ("server_cpu_ms_per_query", "postgres_cpu_ms_per_query", "client_cpu_ms_per_query")
                    ),
                ]
                for c in summary["cells"]
            ],
        ),
    ]
    mixed = summary.get("mixed")
    if mixed:
        idle, busy = mixed["idle"], mixed["during_ingest"]
        lines += [
            f"## During a bulk ingest (hybrid, {mixed['concurrency']} clients)\n",
            markdown_table(
                ["phase", "QPS", "p50", "p95", "p99", "ok/sent", "degraded", "5xx"],
                [
                    [
                        name,
                        r["qps"],
                        r["p50_ms"],
                        r["p95_ms"],
                        r["p99_ms"],
                        f"{r['ok']}/{r['sent']}",
                        r["degraded"],
                        r["other_5xx"],
                    ]
                    for name, r in (("idle", idle), ("during ingest", busy))
                ],
            ),
            (
                f"Ingested {mixed['ingested_documents']} abstracts in {mixed['ingest_s']} s "
                f"({mixed['ingest_documents_per_s']} docs/s, batches ok {mixed['batches_ok']}, "
                f"failed {mixed['batches_failed']}); p95 ratio {mixed['p95_ratio']}.\n"
            ),
        ]
    lines.append(f"Server RSS: {summary['server_rss_mib']} MiB (cache off, after the mixed run).\n")
    return "\n".join(lines)


async def measure(arguments: argparse.Namespace, data_dir: Path) -> dict[str, Any]:
    texts = load_query_texts()
    cursor = QueryCursor(texts)
    corpus = corpus_documents()
    seed, bulk = corpus[: arguments.documents], corpus[arguments.documents :][: arguments.mixed_documents]
    with ServiceUnderTest(data_dir, environment={"QUERY_CACHE_TTL_SECS": "0"}) as service:
        # In a thread: the event loop stays free, so Ctrl-C cancels and the service is stopped.
        await asyncio.to_thread(ingest_documents, service.url, PROJECT, seed, batch_size=INGEST_BATCH_DOCUMENTS)
        await asyncio.to_thread(wait_for_lexical_index, service.url, PROJECT, timeout_s=LEXICAL_WAIT_S)
        check_both_legs_answer(service.url, texts[0])
        await warm_up(service.url, cursor, arguments.strategies)
        cells = await run_matrix(service, cursor, arguments, cache="off")
        mixed = None
        if bulk:
            mixed = await run_mixed(
                service.url, cursor, bulk, concurrency=arguments.mixed_concurrency, idle_s=arguments.cell_s
            )
            print(
                f"mixed: idle p95 {mixed['idle']['p95_ms']} ms, during ingest p95 "
                f"{mixed['during_ingest']['p95_ms']} ms, ratio {mixed['p95_ratio']}",
                flush=True,
            )
        rss_mib = round(rss_bytes(service.pid) / 2**20, 1)
    repeated = texts[: arguments.cache_queries]
    repeat_cursor = QueryCursor(repeated)
    with ServiceUnderTest(data_dir, environment={"QUERY_CACHE_TTL_SECS": CACHE_ON_TTL_S}) as service:
        async with new_search_client(service.url, connections=1) as client:
            for strategy in arguments.strategies:  # the warming pass: every repeated text cached per strategy
                for text in repeated:
                    await client.get("/memory/query", params={"query": text, "project": PROJECT, "strategy": strategy})
        cells += await run_matrix(service, repeat_cursor, arguments, cache="on")
    return {
        "label": arguments.label,
        "command": "scripts/bench_load.py " + shlex.join(sys.argv[1:]),
        "machine": machine_description(),
        "documents": len(seed),
        "cell_s": arguments.cell_s,
        "distinct_queries": len(texts),
        "query_pool_wrapped": cursor.wrapped,
        "cells": cells,
        "mixed": mixed,
        "server_rss_mib": rss_mib,
        "targets": evaluate_targets(cells, mixed),
    }


def main(argv: list[str] | None = None) -> int:
    arguments = parse_arguments(argv)
    return run_benchmark(
        lambda data_dir: measure(arguments, data_dir),
        output=arguments.output,
        data_dir_prefix="bench-load-",
        render_markdown=render_markdown,
    )


if __name__ == "__main__":
    sys.exit(main())
