"""Every request through the real app: a request id, a server span that continues the caller's trace."""

from __future__ import annotations

import re

from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from tests.ops.conftest import CORPUS

CALLER_TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN_ID = "00f067aa0ba902b7"


async def test_a_search_continues_the_callers_trace_under_a_server_span(ops_app, unique_name) -> None:
    exporter = InMemorySpanExporter()
    async with ops_app.client(span_processors=[SimpleSpanProcessor(exporter)]) as client:
        await client.post(f"/v1/projects/{unique_name}/documents", json={"documents": list(CORPUS)})
        exporter.clear()
        response = await client.get(
            "/memory/query",
            params={"query": "vacuum storage", "project": unique_name},
            headers={"traceparent": f"00-{CALLER_TRACE_ID}-{CALLER_SPAN_ID}-01", "x-request-id": "agent-run-7"},
        )

    assert response.status_code == 200
    spans = exporter.get_finished_spans()
    server = next(span for span in spans if span.kind == SpanKind.SERVER)
    search = next(span for span in spans if span.name == "search.request")
    assert server.name == "GET /memory/query"
    assert server.attributes["http.route"] == "/memory/query"
    assert server.attributes["http.response.status_code"] == 200
    assert server.attributes["http.request.id"] == "agent-run-7"
    assert format(server.context.trace_id, "032x") == CALLER_TRACE_ID
    assert format(server.parent.span_id, "016x") == CALLER_SPAN_ID
    assert search.parent.span_id == server.context.span_id
    assert all(format(span.context.trace_id, "032x") == CALLER_TRACE_ID for span in spans)
    assert response.headers["x-request-id"] == "agent-run-7"
    assert response.headers["traceresponse"] == f"00-{CALLER_TRACE_ID}-{server.context.span_id:016x}-01"


async def test_a_write_is_traced_under_its_route_and_gets_a_new_request_id(ops_app, unique_name) -> None:
    exporter = InMemorySpanExporter()
    async with ops_app.client(span_processors=[SimpleSpanProcessor(exporter)]) as client:
        response = await client.post(
            f"/v1/projects/{unique_name}/documents", json=CORPUS[0], headers={"x-request-id": "not valid"}
        )

    assert response.status_code == 201
    (server,) = (span for span in exporter.get_finished_spans() if span.kind == SpanKind.SERVER)
    assert server.parent is None  # no traceparent: the request starts its trace
    assert server.name == f"POST {server.attributes['http.route']}"
    assert "{" in server.attributes["http.route"]  # the template, not the project's name
    assert unique_name not in server.name
    assert re.fullmatch(r"[0-9a-f]{32}", response.headers["x-request-id"])  # the malformed one was replaced
    assert server.attributes["http.request.id"] == response.headers["x-request-id"]


async def test_a_refused_request_is_not_a_failed_span_and_probes_are_not_traced(ops_app, unique_name) -> None:
    exporter = InMemorySpanExporter()
    async with ops_app.client(span_processors=[SimpleSpanProcessor(exporter)]) as client:
        refused = await client.get("/memory/query", params={"query": "", "project": unique_name})
        probe = await client.get("/healthz")

    assert refused.status_code == 400
    assert probe.status_code == 200
    assert "x-request-id" in probe.headers
    assert "traceresponse" not in probe.headers
    (server,) = (span for span in exporter.get_finished_spans() if span.kind == SpanKind.SERVER)
    assert server.attributes["http.response.status_code"] == 400
    assert server.status.status_code == StatusCode.UNSET


async def test_without_tracing_a_request_still_gets_an_id_and_no_span(ops_app, unique_name) -> None:
    exporter = InMemorySpanExporter()
    async with ops_app.client(span_processors=[SimpleSpanProcessor(exporter)], tracing_enabled=False) as client:
        response = await client.get("/memory/query", params={"query": "vacuum", "project": unique_name})

    assert response.status_code == 200
    assert "traceresponse" not in response.headers
    assert response.headers["x-request-id"]
    assert exporter.get_finished_spans() == ()
