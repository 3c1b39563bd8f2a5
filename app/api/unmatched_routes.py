"""Requests no route matches, in the `poimen_http_*` metrics under one route label: `path="<unmatched>"`.

Litestar's Prometheus middleware runs per route, after routing: a 404 for an unknown path or a 405 for a
method the path does not take (a scanner's flood: about a third of random traffic) was raised by routing before
it and counted nowhere. This middleware wraps the whole app and records what routing left without a route
template, into the same families with the same labels (one series per method and status, never the path: a
scanner's paths would be a series each). A method outside RFC 9110's is `other` (httptools accepts WebDAV's and
more, each a series). Such requests are instant: they get no `poimen_http_requests_in_progress` sample.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Final

from litestar.enums import ScopeType
from litestar.plugins.prometheus import PrometheusConfig, PrometheusMiddleware
from litestar.status_codes import HTTP_500_INTERNAL_SERVER_ERROR

from app.observability.metric_labels import OTHER

if TYPE_CHECKING:
    from litestar import Litestar
    from litestar.types import ASGIApp, Message, Receive, Scope, Send

UNMATCHED_ROUTE: Final = "<unmatched>"
"""The route label (and the access log's route) of a request routing matched to no route."""
HTTP_METHODS: Final = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"})


def method_label(method: str) -> str:
    """`method` when RFC 9110 (or RFC 5789, PATCH) defines it, else `other`: the label's values stay bounded."""
    return method if method in HTTP_METHODS else OTHER


class UnmatchedRouteMetrics(PrometheusMiddleware):
    """ASGI middleware around the whole app: counts a request routing matched to no route, once it is answered.

    The families are Litestar's own (`PrometheusMiddleware._metrics`, created by whichever middleware records
    first), so a matched request is still counted by the per-route middleware alone.
    """

    def __init__(self, app: ASGIApp, config: PrometheusConfig) -> None:
        super().__init__(app, config)
        self._app_name = config.app_name

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Run the request; when routing set no route template on the scope, count it as `<unmatched>`."""
        if scope["type"] != ScopeType.HTTP:
            await self.app(scope, receive, send)
            return
        started_s = time.perf_counter()
        # No answer started when the app raised: the server then answers 500.
        answer: dict[str, Any] = {"status": HTTP_500_INTERNAL_SERVER_ERROR, "ended_s": None}

        async def send_observed(message: Message) -> None:
            if message["type"] == "http.response.start":
                answer["status"] = message["status"]
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                answer["ended_s"] = time.perf_counter()

        try:
            await self.app(scope, receive, send_observed)
        finally:
            if not scope.get("path_template"):  # routing sets it on a match, the one mark of one
                self._record(scope["method"], answer["status"], (answer["ended_s"] or time.perf_counter()) - started_s)

    def _record(self, method: str, status: int, duration_s: float) -> None:
        # The per-route middleware's labels, in its order: its families were made with these names.
        labels: dict[str, str | int | float] = {
            "method": method_label(method),
            "path": UNMATCHED_ROUTE,
            "status_code": status,
            "app_name": self._app_name,
        }
        values = list(labels.values())
        if status >= HTTP_500_INTERNAL_SERVER_ERROR:
            self.requests_error_count(labels).labels(*values).inc()
        self.request_count(labels).labels(*values).inc()
        self.request_time(labels).labels(*values).observe(duration_s)


def count_unmatched_routes(app: Litestar, config: PrometheusConfig) -> None:
    """Count `app`'s requests that match no route (with metrics on; see the module's docstring)."""
    app.asgi_handler = UnmatchedRouteMetrics(app.asgi_handler, config)
