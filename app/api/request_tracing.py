"""Every HTTP request: a request id (the caller's `X-Request-Id` or a new one) and a server span.

The span continues the caller's trace when the request carries a W3C `traceparent`, and is the parent of
whatever the request does (a search's `search.request`, an engine's spans), so one trace shows an
agent's call end to end. The response says which request and trace it was: `X-Request-Id` always, and
`traceresponse` (W3C Trace Context level 2: version, trace id, the server span's id, flags) when the
request was traced. The request id reaches every log line written while the request runs
(`app/observability/logs.py`).

Probes, metrics and the API document get a request id but no span: a kubelet probing every few seconds
would otherwise fill the trace store with spans nobody reads. With `TRACING_ENABLED=false` no span is
made at all.
"""

from __future__ import annotations

import re
import uuid
from typing import TYPE_CHECKING, Final

from litestar.enums import ScopeType
from opentelemetry import trace
from opentelemetry.semconv.attributes.http_attributes import (
    HTTP_REQUEST_METHOD,
    HTTP_RESPONSE_STATUS_CODE,
    HTTP_ROUTE,
)
from opentelemetry.semconv.attributes.url_attributes import URL_PATH
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from app.api.response_headers import with_headers
from app.observability.logs import REQUEST_ID
from app.observability.tracing import current_tracer

if TYPE_CHECKING:
    from collections.abc import Iterable

    from litestar import Litestar
    from litestar.types import ASGIApp, HTTPScope, Message, Receive, Scope, Send

UNTRACED_PREFIXES: Final = ("/healthz", "/readyz", "/metrics", "/schema")
REQUEST_ID_HEADER: Final = b"x-request-id"
SPAN_ATTRIBUTE_REQUEST_ID: Final = "http.request.id"
_VALID_REQUEST_ID: Final = re.compile(rb"[A-Za-z0-9._:@/+=-]{1,128}")
"""A caller's id is kept when it is this: long enough for a UUID or a trace id, nothing a log line could
mistake for its own structure (no space, quote or control character). Anything else is replaced, not refused."""
TRACEPARENT_HEADER: Final = b"traceparent"
TRACESTATE_HEADER: Final = b"tracestate"
_PROPAGATOR: Final = TraceContextTextMapPropagator()
_SERVER_ERROR: Final = 500


def caller_request_id(headers: Iterable[tuple[bytes, bytes]]) -> str | None:
    """The caller's `X-Request-Id` when it is a well-formed one, else None (a new id is made)."""
    for name, value in headers:
        if name == REQUEST_ID_HEADER and _VALID_REQUEST_ID.fullmatch(value):
            return value.decode("ascii")
    return None


def trace_carrier(headers: Iterable[tuple[bytes, bytes]]) -> dict[str, list[str]]:
    """The caller's trace headers as the propagator reads them, or nothing when there is no single `traceparent`.

    uvicorn hands every header line over on its own. Two `traceparent` lines name no parent: the request
    starts a new trace (the W3C Trace Context test suite, `test_traceparent_duplicated`; taking either one
    would attach the request to a trace chosen by whichever proxy added the last line). Several `tracestate`
    lines are one list, in order (RFC 9110 5.3: the propagator joins them with commas); keeping only the
    last dropped the vendors named in the others.
    """
    parents: list[str] = []
    states: list[str] = []
    for name, value in headers:
        if name == TRACEPARENT_HEADER:
            parents.append(value.decode("latin-1"))
        elif name == TRACESTATE_HEADER:
            states.append(value.decode("latin-1"))
    if len(parents) != 1:
        return {}
    return {"traceparent": parents, "tracestate": states} if states else {"traceparent": parents}


def traceresponse(span_context: trace.SpanContext) -> str:
    """The W3C `traceresponse` value of a span: `00-<trace id>-<span id>-<flags>`."""
    return f"00-{span_context.trace_id:032x}-{span_context.span_id:016x}-{int(span_context.trace_flags):02x}"


class RequestTracing:
    """ASGI middleware: the request id around the request, and (unless untraced) its server span."""

    def __init__(self, app: ASGIApp, *, traced: bool) -> None:
        self._app = app
        self._traced = traced

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Run the request with its id in the logs' context, inside a server span when traced."""
        if scope["type"] != ScopeType.HTTP:
            await self._app(scope, receive, send)
            return
        request_id = caller_request_id(scope["headers"]) or uuid.uuid4().hex
        token = REQUEST_ID.set(request_id)
        try:
            if self._traced and not scope["path"].startswith(UNTRACED_PREFIXES):
                await self._traced_request(scope, receive, send, request_id)
            else:
                await self._app(scope, receive, with_headers(send, [(REQUEST_ID_HEADER, request_id.encode())]))
        finally:
            REQUEST_ID.reset(token)

    async def _traced_request(self, scope: HTTPScope, receive: Receive, send: Send, request_id: str) -> None:
        method = scope["method"]
        carrier = trace_carrier(scope["headers"])
        attributes = {HTTP_REQUEST_METHOD: method, URL_PATH: scope["path"], SPAN_ATTRIBUTE_REQUEST_ID: request_id}
        with current_tracer().start_as_current_span(
            method,
            context=_PROPAGATOR.extract(carrier) if carrier else None,
            kind=trace.SpanKind.SERVER,
            attributes=attributes,
        ) as span:
            extra = [(REQUEST_ID_HEADER, request_id.encode())]
            if span.get_span_context().is_valid:
                extra.append((b"traceresponse", traceresponse(span.get_span_context()).encode()))

            async def send_observed(message: Message) -> None:
                if message["type"] == "http.response.start":
                    status = message["status"]
                    span.set_attribute(HTTP_RESPONSE_STATUS_CODE, status)
                    if status >= _SERVER_ERROR:  # a 4xx is the caller's error, not the server span's
                        span.set_status(trace.StatusCode.ERROR, str(status))
                await send(message)

            try:
                await self._app(scope, receive, with_headers(send_observed, extra))
            finally:
                # Routing set the matched template on the scope: the span is named after the route, not the
                # path, so its name has as few values as there are routes (the semantic conventions' rule).
                route = scope.get("path_template")
                if route:
                    span.update_name(f"{method} {route}")
                    span.set_attribute(HTTP_ROUTE, route)


def trace_requests(app: Litestar, *, traced: bool) -> None:
    """Put request ids and server spans around `app`'s request handling (before routing and middleware)."""
    app.asgi_handler = RequestTracing(app.asgi_handler, traced=traced)
