"""The load scripts' arithmetic: percentiles, QPS and counts, open-loop pacing, reports and soak verdicts."""

import importlib
import json
import math
import statistics
import sys
from pathlib import Path

import httpx
import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
sys.path.insert(0, str(SCRIPTS))  # the scripts import each other by module name, as `python scripts/x.py` does
loadgen = importlib.import_module("loadgen")
soak_report = importlib.import_module("soak_report")


def test_percentile_interpolates_between_closest_ranks() -> None:
    values = [4.0, 1.0, 3.0, 2.0]

    assert loadgen.percentile(values, 0.50) == pytest.approx(2.5)
    assert loadgen.percentile(values, 0.95) == pytest.approx(3.85)
    assert loadgen.percentile(values, 1.0) == 4.0
    assert loadgen.percentile([7.0], 0.99) == 7.0


def test_percentile_agrees_with_the_standard_library_inclusive_method() -> None:
    values = [float((i * 37) % 101) for i in range(250)]
    cuts = statistics.quantiles(values, n=100, method="inclusive")

    assert loadgen.percentile(values, 0.95) == pytest.approx(cuts[94])
    assert loadgen.percentile(values, 0.99) == pytest.approx(cuts[98])


def test_percentile_of_nothing_is_nan() -> None:
    assert math.isnan(loadgen.percentile([], 0.5))


def test_summary_counts_only_answered_requests_in_qps_and_latency() -> None:
    recorder = loadgen.RunRecorder()
    for elapsed_ms in (10.0, 20.0, 30.0):
        recorder.record(status=200, elapsed_ms=elapsed_ms, body={"metrics": {"total_time_ms": 5.0}}, retry_after=False)
    recorder.record(status=503, elapsed_ms=1.0, body={"title": "Overloaded"}, retry_after=True)
    recorder.record(status=500, elapsed_ms=1.0, body=None, retry_after=False)
    recorder.transport_errors += 1

    summary = recorder.summary(wall_s=2.0)

    assert summary["sent"] == 6
    assert summary["ok"] == 3
    assert summary["qps"] == 1.5
    assert summary["p50_ms"] == 20.0
    assert summary["p95_ms"] == 29.0
    assert summary["shed"] == 1
    assert summary["shed_rate"] == round(1 / 6, 4)
    assert summary["other_5xx"] == 1
    assert summary["status"] == {"200": 3, "500": 1, "503": 1}


def test_summary_reports_server_time_of_cache_hits_apart() -> None:
    recorder = loadgen.RunRecorder()
    recorder.record(
        status=200, elapsed_ms=9.0, body={"cached": True, "metrics": {"total_time_ms": 0.4}}, retry_after=False
    )
    recorder.record(
        status=200, elapsed_ms=9.0, body={"cached": False, "metrics": {"total_time_ms": 40.0}}, retry_after=False
    )
    recorder.record(
        status=200, elapsed_ms=9.0, body={"cached": True, "metrics": {"total_time_ms": 0.6}}, retry_after=False
    )

    summary = recorder.summary(wall_s=1.0)

    assert summary["cached"] == 2
    assert summary["cached_server_p50_ms"] == 0.5
    assert summary["server_p50_ms"] == 0.6


def test_a_shed_answer_without_retry_after_is_not_counted_as_shed() -> None:
    recorder = loadgen.RunRecorder()
    recorder.record(status=503, elapsed_ms=1.0, body={"title": "Overloaded"}, retry_after=False)

    assert recorder.summary(wall_s=1.0)["shed"] == 0


def test_a_503_after_the_engines_failed_is_a_server_error_not_shedding() -> None:
    recorder = loadgen.RunRecorder()
    recorder.record(status=503, elapsed_ms=1.0, body={"title": "Engine unavailable"}, retry_after=True)
    recorder.record(status=429, elapsed_ms=1.0, body={"title": "Too Many Requests"}, retry_after=True)

    summary = recorder.summary(wall_s=1.0)

    assert summary["shed"] == 1
    assert summary["other_5xx"] == 1


def test_query_cursor_counts_each_wrap() -> None:
    cursor = loadgen.QueryCursor(["a", "b"])

    texts = [cursor.next_text() for _ in range(5)]

    assert texts == ["a", "b", "a", "b", "a"]
    assert cursor.wrapped == 2


def test_query_texts_are_distinct_and_in_the_same_order_every_time() -> None:
    first, second = loadgen.load_query_texts(), loadgen.load_query_texts()

    assert first == second
    assert len(set(first)) == len(first)
    assert len(first) > 10_000  # enough that a full benchmark run need not repeat a text


def answering(status: int, body: dict, seen: list[str]) -> httpx.AsyncClient:
    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.params["query"])
        return httpx.Response(status, json=body, headers={"retry-after": "1"} if status == 503 else {})

    return httpx.AsyncClient(base_url="http://test", transport=httpx.MockTransport(handle))


async def test_open_loop_starts_rate_times_duration_requests_on_distinct_texts() -> None:
    seen: list[str] = []
    cursor = loadgen.QueryCursor([f"q{i}" for i in range(100)])
    async with answering(200, {"cached": False, "metrics": {"total_time_ms": 1.0}}, seen) as client:
        load = loadgen.SearchLoad(client, loadgen.SearchTarget("p", "hybrid"), cursor.next_text)

        result = await loadgen.open_loop(load, rate_per_s=200.0, duration_s=0.1)

    assert result["sent"] == 20
    assert result["ok"] == 20
    assert result["offered_qps"] == 200.0
    assert len(set(seen)) == 20


async def test_open_loop_counts_shed_answers_with_retry_after() -> None:
    seen: list[str] = []
    cursor = loadgen.QueryCursor(["q"])
    async with answering(503, {"title": "Overloaded"}, seen) as client:  # the middleware's problem title
        load = loadgen.SearchLoad(client, loadgen.SearchTarget("p"), cursor.next_text)

        result = await loadgen.open_loop(load, rate_per_s=100.0, duration_s=0.05)

    assert result["ok"] == 0
    assert result["shed"] == result["sent"] == 5
    assert result["shed_rate"] == 1.0


async def test_closed_loop_stops_when_told() -> None:
    seen: list[str] = []
    cursor = loadgen.QueryCursor(["q"])
    async with answering(200, {"metrics": {"total_time_ms": 1.0}}, seen) as client:
        load = loadgen.SearchLoad(client, loadgen.SearchTarget("p"), cursor.next_text)

        result = await loadgen.closed_loop(load, concurrency=2, duration_s=math.inf, until=lambda: len(seen) >= 10)

    assert 10 <= result["sent"] <= 11  # each client checks before sending; the other may be one request in
    assert result["concurrency"] == 2


def test_report_writes_standard_json_with_nan_as_null(tmp_path: Path) -> None:
    summary = {"p95_ms": math.nan, "cells": [{"qps": 1.5, "p99_ms": math.nan}]}

    json_path, markdown_path = loadgen.write_report(tmp_path / "out" / "load", summary=summary, markdown="# x\n")

    assert json.loads(json_path.read_text()) == {"p95_ms": None, "cells": [{"qps": 1.5, "p99_ms": None}]}
    assert "NaN" not in json_path.read_text()
    assert markdown_path.read_text() == "# x\n"


def test_markdown_table_prints_missing_values_as_a_dash() -> None:
    table = loadgen.markdown_table(["a", "b"], [[1, math.nan]])

    assert table == "| a | b |\n|---|---|\n| 1 | - |\n"


def test_ratio_of_a_missing_or_zero_denominator_is_nan() -> None:
    assert loadgen.ratio(3.0, 2.0) == 1.5
    assert math.isnan(loadgen.ratio(3.0, 0.0))
    assert math.isnan(loadgen.ratio(math.nan, 2.0))


def soak_sample(
    elapsed_s: float, *, rss: float, descriptors: int = 40, connections: int = 5, p95: float = 50.0
) -> dict:
    return {
        "elapsed_s": elapsed_s,
        "rss_mib": rss,
        "open_descriptors": descriptors,
        "postgres_connections": connections,
        "outbox_backlog": 0.0,
        "searches": 100,
        "cache_hits": 20,
        "search_p95_ms": p95,
        "search_errors": 0,
    }


CLEAN_VERIFICATION = {
    "documents_checked": 10,
    "uncertain_left_out": 0,
    "lost": 0,
    "stale_revision": 0,
    "deleted_but_present": 0,
    "not_lexically_indexed": 0,
}


def test_soak_measures_growth_from_the_first_sample_after_warm_up() -> None:
    samples = [
        soak_sample(0, rss=500),
        soak_sample(60, rss=1000),
        soak_sample(120, rss=1050),
        soak_sample(130, rss=1090),
    ]

    targets = soak_report.summarize(samples, CLEAN_VERIFICATION, warmup_samples=1)

    assert [t["holds"] for t in targets] == [True, True, True, True, True]
    assert "+9.0%" in targets[0]["measured"]


def test_soak_flags_rss_growth_descriptor_growth_and_a_lost_write() -> None:
    samples = [
        soak_sample(0, rss=500),
        soak_sample(60, rss=1000, descriptors=40),
        soak_sample(120, rss=1100, descriptors=60),
        soak_sample(130, rss=1150, descriptors=60),
    ]
    verification = {**CLEAN_VERIFICATION, "lost": 1}

    targets = soak_report.summarize(samples, verification, warmup_samples=1)

    assert [t["holds"] for t in targets] == [False, False, True, True, False]


def test_soak_p95_is_flat_only_within_the_spread() -> None:
    samples = [
        soak_sample(0, rss=1000),
        soak_sample(60, rss=1000, p95=500.0),  # the baseline window is warm-up-adjacent and not judged
        soak_sample(120, rss=1000, p95=40.0),
        soak_sample(180, rss=1000, p95=100.0),
        soak_sample(190, rss=1000),
    ]

    targets = soak_report.summarize(samples, CLEAN_VERIFICATION, warmup_samples=1)

    assert targets[3]["holds"] is False
    assert "2.5x" in targets[3]["measured"]
