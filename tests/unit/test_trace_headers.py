"""The W3C trace headers as uvicorn hands them over: one scope entry per header line, repeats included.

Litestar's test client joins repeated headers into one comma-separated line, so these drive the ASGI
middleware with a raw scope instead.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import re
from typing import TYPE_CHECKING

from opentelemetry.trace import SpanKind

from app.api.request_tracing import RequestTracing
from app.observability.logs import configure_logging

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

CALLER_TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
OTHER_TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4737"
CALLER_SPAN_ID = "00f067aa0ba902b7"


async def answer_ok(scope, receive, send) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b""})


def serve(headers: list[tuple[bytes, bytes]]) -> dict[bytes, bytes]:
    """Run one GET through the middleware; the response's headers."""
    scope = {"type": "http", "method": "GET", "path": "/v1/projects/p", "headers": headers}
    sent: list[dict] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    asyncio.run(RequestTracing(answer_ok, traced=True)(scope, receive, send))
    return dict(sent[0]["headers"])


def test_one_traceparent_is_continued(spans: InMemorySpanExporter) -> None:
    serve([(b"traceparent", f"00-{CALLER_TRACE_ID}-{CALLER_SPAN_ID}-01".encode())])

    (server,) = (span for span in spans.get_finished_spans() if span.kind == SpanKind.SERVER)
    assert format(server.context.trace_id, "032x") == CALLER_TRACE_ID
    assert format(server.parent.span_id, "016x") == CALLER_SPAN_ID


def test_a_traceparent_sent_twice_starts_a_new_trace(spans: InMemorySpanExporter) -> None:
    # W3C Trace Context test suite, test_traceparent_duplicated: neither of two traceparents is the parent.
    headers = serve(
        [
            (b"traceparent", f"00-{CALLER_TRACE_ID}-{CALLER_SPAN_ID}-01".encode()),
            (b"traceparent", f"00-{OTHER_TRACE_ID}-{CALLER_SPAN_ID}-01".encode()),
        ]
    )

    (server,) = (span for span in spans.get_finished_spans() if span.kind == SpanKind.SERVER)
    assert server.parent is None
    assert format(server.context.trace_id, "032x") not in {CALLER_TRACE_ID, OTHER_TRACE_ID}
    assert headers[b"traceresponse"].split(b"-")[1] == format(server.context.trace_id, "032x").encode()


def test_tracestate_sent_in_several_headers_is_kept_whole(spans: InMemorySpanExporter) -> None:
    # RFC 9110 5.3 and W3C Trace Context 3.3.1: several tracestate header lines are one comma-separated list.
    serve(
        [
            (b"traceparent", f"00-{CALLER_TRACE_ID}-{CALLER_SPAN_ID}-01".encode()),
            (b"tracestate", b"congo=t61rcWkgMzE"),
            (b"tracestate", b"rojo=00f067aa0ba902b7"),
        ]
    )

    (server,) = (span for span in spans.get_finished_spans() if span.kind == SpanKind.SERVER)
    assert format(server.context.trace_id, "032x") == CALLER_TRACE_ID
    assert server.context.trace_state.to_header() == "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"


def test_refused_trace_headers_are_logged_once_per_kind_and_interval(spans, restore_root_logger) -> None:
    # OpenTelemetry logs a WARNING for every refused header, echoing the member: anyone who can reach the
    # port wrote a line per request, each up to 8 KB of their text, before any token is checked.
    stream = io.StringIO()
    configure_logging("INFO", json=True, stream=stream)
    bad_state = [
        (b"traceparent", f"00-{CALLER_TRACE_ID}-{CALLER_SPAN_ID}-01".encode()),
        (b"tracestate", b"BAD KEY=@@@"),
    ]
    too_long = [(b"traceparent", f"00-{CALLER_TRACE_ID}-{CALLER_SPAN_ID}-01".encode() + b"0" * 600)]

    for _ in range(5):
        serve(bad_state)
        serve(too_long)

    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    library_lines = [line for line in lines if line["logger"].startswith("opentelemetry")]
    assert [line["message"][:40] for line in library_lines] == [
        "Member doesn't match the w3c identifiers",
        "traceparent header exceeded the maximum ",
    ]


def test_a_text_line_shows_a_callers_terminal_controls_escaped(spans, restore_root_logger) -> None:
    # uvicorn lets bytes 0x80-0xff through in a header; 0x9b read as latin-1 is the C1 CSI, which starts an
    # escape sequence in a terminal just like ESC [. Text lines are for terminals (LOG_JSON=auto).
    stream = io.StringIO()
    configure_logging("INFO", json=False, stream=stream)

    serve([(b"traceparent", f"00-{CALLER_TRACE_ID}-{CALLER_SPAN_ID}-01".encode()), (b"tracestate", b"k=\x9b2J")])
    logging.getLogger("poimen.test").warning("caller sent %s\r", "\x1b[31mred")

    text = stream.getvalue()
    assert "k=\\x9b2J" in text
    assert "\\x1b[31mred" in text
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", text)
