"""`GET /metrics` after real queries through the app: every stage, the counters, promtool-clean output."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.ops.conftest import CORPUS, sample, wait_indexed
from tests.unit.test_metric_documentation import documented_metrics

STAGES_BY_STRATEGY = {
    "hybrid": {"optimize", "embed", "semantic", "lexical", "fusion", "total"},
    "semantic": {"optimize", "embed", "semantic", "fusion", "total"},
    "lexical": {"optimize", "lexical", "fusion", "total"},
    "cascading": {"optimize", "embed", "lexical", "semantic", "fusion", "total"},
}
STAGE_COUNT = "poimen_query_stage_duration_seconds_count"


def stage_counts(text: str) -> dict[tuple[str, str, str], float]:
    """(stage, strategy, arm) -> observation count, parsed from an exposition text."""
    counts: dict[tuple[str, str, str], float] = {}
    for family in text_string_to_metric_families(text):
        for metric_sample in family.samples:
            if metric_sample.name == STAGE_COUNT:
                labels = metric_sample.labels
                counts[labels["stage"], labels["strategy"], labels["arm"]] = metric_sample.value
    return counts


async def ingest_corpus(client, project: str) -> None:
    response = await client.post(f"/v1/projects/{project}/documents", json={"documents": list(CORPUS)})
    assert response.status_code == 201, response.text
    for item in CORPUS:
        await wait_indexed(client, project, item["id"])


async def test_every_stage_of_every_strategy_is_scraped_with_its_arm(ops_app, unique_name) -> None:
    async with ops_app.client() as client:
        await ingest_corpus(client, unique_name)
        before = stage_counts((await client.get("/metrics")).text)
        for strategy in STAGES_BY_STRATEGY:
            response = await client.get(
                "/memory/query", params={"query": f"ttl cache {strategy}", "project": unique_name, "strategy": strategy}
            )
            assert response.status_code == 200, response.text
            assert response.json()["rollout_arm"] == "control"
        # No strategy chosen: the rollout (100 % hybrid by default) assigns the arm.
        routed = await client.get("/memory/query", params={"query": "vacuum dead tuples", "project": unique_name})
        scrape = await client.get("/metrics")

    assert routed.json()["rollout_arm"] == "hybrid"
    after = stage_counts(scrape.text)
    grown = {key for key, value in after.items() if value > before.get(key, 0.0)}
    for strategy, stages in STAGES_BY_STRATEGY.items():
        assert {stage for stage, s, arm in grown if s == strategy and arm == "control"} == stages, strategy
    assert {stage for stage, s, arm in grown if s == "hybrid" and arm == "hybrid"} == STAGES_BY_STRATEGY["hybrid"]


async def test_counters_for_queries_cache_ingest_and_fallbacks_are_exported(ops_app, unique_name) -> None:
    queries_before = sample("poimen_queries_total", strategy="lexical", arm="control", outcome="ok")
    hits_before = sample("poimen_query_cache_requests_total", result="hit")
    created_before = sample("poimen_ingested_documents_total", status="created")
    chunks_before = sample("poimen_ingested_chunks_total")
    async with ops_app.client() as client:
        await ingest_corpus(client, unique_name)
        params = {"query": "kubectl port-forward", "project": unique_name, "strategy": "lexical"}
        first = (await client.get("/memory/query", params=params)).json()
        second = (await client.get("/memory/query", params=params)).json()
        text = (await client.get("/metrics")).text

    assert (first["cached"], second["cached"]) == (False, True)
    assert sample("poimen_queries_total", strategy="lexical", arm="control", outcome="ok") == queries_before + 2
    assert sample("poimen_query_cache_requests_total", result="hit") == hits_before + 1
    assert sample("poimen_ingested_documents_total", status="created") == created_before + len(CORPUS)
    assert sample("poimen_ingested_chunks_total") >= chunks_before + len(CORPUS)
    families = {family.name for family in text_string_to_metric_families(text)}
    assert {
        "poimen_queries",
        "poimen_query_cache_requests",
        "poimen_fallbacks",
        "poimen_engine_errors",
        "poimen_ingested_documents",
        "poimen_ingested_chunks",
        "poimen_lexical_outbox_backlog",
        "poimen_lexical_outbox_oldest_age_seconds",
        "poimen_query_results",
        "poimen_flags_version",
        "poimen_flags_fingerprint",
        "poimen_rollout_hybrid_percent",
        "poimen_shadow_overlap_at_10",
    } <= families
    assert any(name.startswith("poimen_http") for name in families)
    assert 'reason="lexical_unavailable"' in text


async def test_a_failing_leg_counts_a_fallback_and_an_engine_error_and_reads_degraded(ops_app, unique_name) -> None:
    async with ops_app.client() as client:
        await ingest_corpus(client, unique_name)
        ready_before = await client.get("/readyz")
        fallbacks_before = sample("poimen_fallbacks_total", reason="lexical_unavailable", arm="hybrid")
        errors_before = sample("poimen_engine_errors_total", engine="tantivy", arm="hybrid")
        await ops_app.engines.close_lexical()  # the lexical engine goes down under the running app
        response = await client.get("/memory/query", params={"query": "vacuum storage", "project": unique_name})
        await _wait_past_readiness_cache()
        ready_after = await client.get("/readyz")
        live_after = await client.get("/healthz")

    body = response.json()
    assert response.status_code == 200, body
    assert body["degraded"] is True
    assert body["degraded_reasons"] == ["lexical_unavailable"]
    assert sample("poimen_fallbacks_total", reason="lexical_unavailable", arm="hybrid") == fallbacks_before + 1
    assert sample("poimen_engine_errors_total", engine="tantivy", arm="hybrid") == errors_before + 1
    assert sample("poimen_queries_total", strategy="hybrid", arm="hybrid", outcome="degraded") >= 1
    assert ready_before.status_code == 200
    assert ready_after.status_code == 200  # the semantic leg still answers: the pod stays in the Service
    assert ready_after.json()["status"] == "degraded"
    assert ready_after.json()["checks"]["lexical"].startswith("down")
    assert live_after.status_code == 200


async def _wait_past_readiness_cache() -> None:
    import asyncio  # noqa: PLC0415

    from app.api.operator_routes import READINESS_CACHE_S  # noqa: PLC0415

    await asyncio.sleep(READINESS_CACHE_S + 0.1)


async def test_metrics_output_passes_promtool(ops_app, unique_name) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not on PATH (Debian package `prometheus`); `.ci/run` installs it")
    async with ops_app.client() as client:
        await ingest_corpus(client, unique_name)
        await client.get("/memory/query", params={"query": "ttl cache", "project": unique_name})
        text = (await client.get("/metrics")).text

    checked = subprocess.run(
        [promtool, "check", "metrics"], input=text, capture_output=True, text=True, check=False, timeout=30
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "poimen_query_stage_duration_seconds_bucket" in text


async def test_requests_of_a_project_named_like_the_metrics_path_are_counted(ops_app, unique_name) -> None:
    # `/metrics` itself is left out of the HTTP metrics; a path that merely contains it is an API request.
    project = f"metrics-{unique_name}"
    write = {"method": "POST", "path": "/v1/projects/{project}/documents", "status_code": "201"}
    read = {"method": "GET", "path": "/v1/projects/{project}/documents/{document_id}", "status_code": "404"}
    writes_before = sample("poimen_http_requests_total", app_name="poimen", **write)
    reads_before = sample("poimen_http_requests_total", app_name="poimen", **read)
    async with ops_app.client() as client:
        created = await client.post(f"/v1/projects/{project}/documents", json={"documents": [CORPUS[0]]})
        missing = await client.get(f"/v1/projects/{project}/documents/metrics")
        scrape = await client.get("/metrics")

    assert (created.status_code, missing.status_code, scrape.status_code) == (201, 404, 200)
    assert sample("poimen_http_requests_total", app_name="poimen", **write) == writes_before + 1
    assert sample("poimen_http_requests_total", app_name="poimen", **read) == reads_before + 1
    assert 'path="/metrics"' not in scrape.text


async def test_http_durations_have_buckets_for_writes_that_take_minutes(ops_app, unique_name) -> None:
    # A write embeds its chunks before it answers: about 45 s per MB on 2 cores (docs/operations.md).
    async with ops_app.client() as client:
        await client.post(f"/v1/projects/{unique_name}/documents", json={"documents": [CORPUS[0]]})
        scrape = await client.get("/metrics")

    bounds = {
        metric_sample.labels["le"]
        for family in text_string_to_metric_families(scrape.text)
        for metric_sample in family.samples
        if metric_sample.name == "poimen_http_request_duration_seconds_bucket"
        and metric_sample.labels["path"] == "/v1/projects/{project}/documents"
    }
    assert {"0.005", "0.1", "1.0", "10.0", "60.0", "300.0", "+Inf"} <= bounds


async def test_counters_and_histograms_carry_no_created_twin_series(ops_app, unique_name) -> None:
    # prometheus-client's `<name>_created` samples are one more series per label set in the text format.
    async with ops_app.client() as client:
        await ingest_corpus(client, unique_name)
        await client.get("/memory/query", params={"query": "ttl cache", "project": unique_name})
        text = (await client.get("/metrics")).text

    names = {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line and not line.startswith("#")}
    created = sorted(name for name in names if name.endswith("_created"))
    assert "poimen_queries_total{" in text
    assert created == []


async def test_every_scraped_family_is_documented_with_its_type_and_labels(ops_app, unique_name) -> None:
    documented = documented_metrics()
    async with ops_app.client() as client:
        await ingest_corpus(client, unique_name)
        await client.get("/memory/query", params={"query": "ttl cache", "project": unique_name})
        await client.get(f"/v1/projects/{unique_name}/documents/missing")
        text = (await client.get("/metrics")).text

    scraped = {}
    for family in text_string_to_metric_families(text):
        if family.name.startswith("poimen_"):
            labels = {frozenset(s.labels) - {"le"} for s in family.samples}
            scraped[family.name + ("_total" if family.type == "counter" else "")] = (family.type, labels)
    # The middleware makes the error family at the process's first 5xx (docs/operations.md): another test in
    # this process may have answered one, so it is compared only when scraped.
    first_5xx = "poimen_http_requests_error_total"
    assert {name: kind for name, (kind, _) in scraped.items() if name != first_5xx} == {
        name: kind for name, (kind, _) in documented.items() if name != first_5xx
    }
    if first_5xx in scraped:
        assert scraped[first_5xx][0] == documented[first_5xx][0]
    for name, (_, label_sets) in scraped.items():
        assert label_sets <= {documented[name][1]}, name
