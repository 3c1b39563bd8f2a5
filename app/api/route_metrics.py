"""The per-route `poimen_http_*` metrics: a request cut before its answer started is the 500 the server sends.

Litestar's `PrometheusMiddleware` labels a request 200 until an answer starts and observes its duration when a
body goes out. A request that ended in an exception past the framework's exception handling before answering
(uvicorn cancels the requests still running `timeout_graceful_shutdown`, 20 s, after SIGTERM: an ingest still
embedding, a body still arriving) was counted as a 200 taking 0 s, while uvicorn answered it 500 and the access
log (`app.api.access_log`) wrote that 500. This middleware keeps Litestar's families and labels (and
`poimen_http_requests_in_progress` labelled 200, as documented) and records the status actually sent: 500 when
none started, as the access log and `app.api.unmatched_routes` do, with the time until it ended.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from litestar.connection.request import Request
from litestar.plugins.prometheus import PrometheusMiddleware
from litestar.status_codes import HTTP_500_INTERNAL_SERVER_ERROR

if TYPE_CHECKING:
    from litestar.types import Message, Receive, Scope, Send


class RouteMetrics(PrometheusMiddleware):
    """Litestar's per-route Prometheus middleware, recording the status a request was really answered with."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Run the request; count it under the status sent (500 when no answer started) once it ends."""
        request = Request[Any, Any, Any](scope, receive)
        if self._config.excluded_http_methods and request.method in self._config.excluded_http_methods:
            await self.app(scope, receive, send)
            return
        labels = {**self._get_default_labels(request), **self._get_extra_labels(request)}
        started_s = time.perf_counter()
        # No answer started when the app raised: the server then answers 500.
        answer: dict[str, Any] = {"status": HTTP_500_INTERNAL_SERVER_ERROR, "ended_s": None}

        async def send_observed(message: Message) -> None:
            if message["type"] == "http.response.start":
                answer["status"] = message["status"]
            elif message["type"] == "http.response.body":
                answer["ended_s"] = time.perf_counter()  # as Litestar: up to the last body part handed over
            await send(message)

        in_progress = self.requests_in_progress(labels).labels(*labels.values())
        in_progress.inc()
        try:
            await self.app(scope, receive, send_observed)
        finally:
            in_progress.dec()
            duration_s = (answer["ended_s"] or time.perf_counter()) - started_s
            extra: dict[str, Any] = (
                {} if self._config.exemplars is None else {"exemplar": self._config.exemplars(request)}
            )
            labels["status_code"] = answer["status"]
            values = list(labels.values())
            if answer["status"] >= HTTP_500_INTERNAL_SERVER_ERROR:
                self.requests_error_count(labels).labels(*values).inc(**extra)
            self.request_count(labels).labels(*values).inc(**extra)
            self.request_time(labels).labels(*values).observe(duration_s, **extra)
