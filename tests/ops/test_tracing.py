"""Spans through the real app, caught by an in-memory exporter: one request span, a child per stage."""

from __future__ import annotations

from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.ops.conftest import CORPUS, wait_indexed


async def test_a_search_is_one_request_span_with_a_child_per_stage(ops_app, unique_name) -> None:
    exporter = InMemorySpanExporter()
    async with ops_app.client(span_processors=[SimpleSpanProcessor(exporter)]) as client:
        await client.post(f"/v1/projects/{unique_name}/documents", json={"documents": list(CORPUS)})
        for item in CORPUS:
            await wait_indexed(client, unique_name, item["id"])
        exporter.clear()
        response = await client.get("/memory/query", params={"query": "ttl cache results", "project": unique_name})

    assert response.status_code == 200
    spans = exporter.get_finished_spans()
    requests = [span for span in spans if span.name == "search.request"]
    assert len(requests) == 1
    request = requests[0]
    children = {
        span.name for span in spans if span.parent is not None and span.parent.span_id == request.context.span_id
    }
    assert children == {
        "search.optimize",
        "search.embed",
        "search.engine.pgvector",
        "search.engine.tantivy",
        "search.fuse",
    }
    assert all(span.context.trace_id == request.context.trace_id for span in spans if span.name.startswith("search."))
    assert request.attributes["search.strategy"] == "hybrid"
    assert request.attributes["search.arm"] == "hybrid"
    assert request.attributes["search.outcome"] == "ok"
    assert request.attributes["search.result_count"] == len(response.json()["results"])
    assert request.attributes["search.degraded_reasons"] == ()


async def test_a_failed_leg_marks_its_span_and_the_degraded_reason_on_the_request(ops_app, unique_name) -> None:
    exporter = InMemorySpanExporter()
    async with ops_app.client(span_processors=[SimpleSpanProcessor(exporter)]) as client:
        await client.post(f"/v1/projects/{unique_name}/documents", json={"documents": list(CORPUS)})
        await ops_app.engines.close_lexical()
        exporter.clear()
        response = await client.get("/memory/query", params={"query": "vacuum storage", "project": unique_name})

    assert response.json()["degraded"] is True
    spans = {span.name: span for span in exporter.get_finished_spans()}
    assert spans["search.request"].attributes["search.outcome"] == "degraded"
    assert spans["search.request"].attributes["search.degraded_reasons"] == ("lexical_unavailable",)
    assert not spans["search.engine.tantivy"].status.is_ok
    assert spans["search.engine.tantivy"].attributes["search.engine_error"] == "lexical_unavailable"
    assert spans["search.engine.pgvector"].status.is_ok


async def test_a_cache_hit_is_marked_on_the_request_span(ops_app, unique_name) -> None:
    exporter = InMemorySpanExporter()
    async with ops_app.client(span_processors=[SimpleSpanProcessor(exporter)]) as client:
        await client.post(f"/v1/projects/{unique_name}/documents", json={"documents": list(CORPUS)})
        for item in CORPUS:
            await wait_indexed(client, unique_name, item["id"])
        params = {"query": "vacuum", "project": unique_name, "strategy": "semantic"}
        await client.get("/memory/query", params=params)
        exporter.clear()
        await client.get("/memory/query", params=params)

    names = [span.name for span in exporter.get_finished_spans()]
    request = next(span for span in exporter.get_finished_spans() if span.name == "search.request")
    assert request.attributes["search.cached"] is True
    assert request.attributes["search.arm"] == "control"
    assert "search.embed" not in names
