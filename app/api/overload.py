"""Overload protection: a bounded number of requests in flight per process, and an optional per-caller rate.

Past `MAX_CONCURRENT_REQUESTS` a request is shed at once with 503 and `Retry-After` instead of queueing
without bound (a queue only turns overload into latency and memory). The limiter wraps the whole
application, routing included (`guard_concurrency`): Litestar's own `middleware` runs per route, after
routing, and under 4x overload what each shed request still cost the serving loop cut the rate it served
(docs/reliability.md, "Overload"). Probes, metrics and the API document are never shed: a busy replica
must still answer its kubelet. The per-caller limit (`app/search/rate_limit.py`) is applied by the
guards, once the caller is known.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Final

from litestar.enums import ScopeType

from app.api.errors import PROBLEM_MEDIA_TYPE, RETRY_AFTER_S
from app.observability.metrics import record_shed

if TYPE_CHECKING:
    from litestar import Litestar
    from litestar.types import ASGIApp, HTTPResponseBodyEvent, HTTPResponseStartEvent, Receive, Scope, Send

NEVER_SHED_PREFIXES: Final = ("/healthz", "/readyz", "/metrics", "/schema")


class ConcurrencyLimit:
    """ASGI middleware: at most `limit` HTTP requests in flight (outside `NEVER_SHED_PREFIXES`); 503 beyond."""

    def __init__(self, app: ASGIApp, *, limit: int) -> None:
        self._app = app
        self._limit = limit
        self._in_flight = 0  # one event loop per process: no lock needed between awaits
        # The refusal is the same every time: built once, so shedding costs no serialisation.
        detail = f"more than {limit} requests in flight; retry shortly"
        self._refusal = json.dumps({"type": "about:blank", "title": "Overloaded", "status": 503, "detail": detail})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on, or shed it when `limit` requests are already in flight."""
        if scope["type"] != ScopeType.HTTP or scope["path"].startswith(NEVER_SHED_PREFIXES):
            await self._app(scope, receive, send)
            return
        if self._in_flight >= self._limit:
            record_shed("overload")
            await _problem(send, 503, self._refusal.encode())
            return
        self._in_flight += 1
        try:
            await self._app(scope, receive, send)
        finally:
            self._in_flight -= 1


def guard_concurrency(app: Litestar, *, limit: int) -> None:
    """Put the limiter in front of `app`'s whole request handling: before routing, middleware and tracing."""
    # `asgi_handler` is what `Litestar.__call__` hands every HTTP request to, after lifespan events.
    app.asgi_handler = ConcurrencyLimit(app.asgi_handler, limit=limit)


async def _problem(send: Send, status: int, body: bytes) -> None:
    start: HTTPResponseStartEvent = {
        "type": "http.response.start",
        "status": status,
        "headers": [
            (b"content-type", PROBLEM_MEDIA_TYPE.encode()),
            (b"retry-after", str(RETRY_AFTER_S).encode()),
            (b"content-length", str(len(body)).encode()),
        ],
    }
    await send(start)
    end: HTTPResponseBodyEvent = {"type": "http.response.body", "body": body, "more_body": False}
    await send(end)
