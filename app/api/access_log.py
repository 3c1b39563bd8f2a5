"""The access log (`ACCESS_LOG_ENABLED`, off by default): one INFO line per HTTP request, once it is answered.

`poimen.access` logger, through the process's handler (JSON lines in a container), so each line carries the
`request_id`, and the `trace_id` and `span_id` of the request's server span when it is traced. Its fields:
`method` (as sent: a HEAD stays HEAD), `route` (the matched route's template, `<unmatched>` when none matched),
`status`, `duration_ms` (from the request reaching the app to its answer's last byte handed to the server),
`response_bytes` (of the body sent: 0 for a HEAD), `project` (the one named in the path, query or body, once
its id is well formed) and `subject` (the verified token's `sub`; null without auth or before the token is
accepted).

The route, not the path: a path holds project and document ids a caller chose, which are the caller's
content (docs/security.md: memory stays out of logs) and would give every line its own value. Nor the query
string (a search's text), a body or a header (a token). A request shed for overload (`poimen_requests_shed_total`)
never reaches the app: no line. A request the HTTP protocol refuses before the app (a malformed head 400, a late
one 408, a URL over the head cap 414, a head over it 431: `app.api.request_head`) has its line all the same,
under the route `<refused>`, its `method` null when none was read, `duration_ms` from its head's first byte (or
the connection's opening) and no project or subject.

Off, the middleware is not installed: a request pays nothing for it.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any, Final

from litestar.enums import ScopeType
from litestar.status_codes import HTTP_500_INTERNAL_SERVER_ERROR

from app.api.guards import PRINCIPAL_STATE_KEY, PROJECT_STATE_KEY
from app.api.unmatched_routes import UNMATCHED_ROUTE
from app.auth.tokens import ANONYMOUS

if TYPE_CHECKING:
    from litestar import Litestar
    from litestar.types import ASGIApp, HTTPScope, Message, Receive, Scope, Send

    from app.auth.tokens import Principal

ACCESS_LOGGER: Final = "poimen.access"
REFUSED_ROUTE: Final = "<refused>"
"""The route of a request the HTTP protocol refused before the app (`app.api.request_head`)."""
logger = logging.getLogger(ACCESS_LOGGER)


class AccessLog:
    """ASGI middleware: one `poimen.access` INFO line per HTTP request, written after its answer."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Run the request, counting what its answer sent; then log its line."""
        if scope["type"] != ScopeType.HTTP or not logger.isEnabledFor(logging.INFO):
            await self._app(scope, receive, send)
            return
        started_s = time.perf_counter()
        # No answer started when the app raised: the server then answers 500.
        answer: dict[str, Any] = {"status": HTTP_500_INTERNAL_SERVER_ERROR, "bytes": 0, "ended_s": None}

        async def send_counted(message: Message) -> None:
            if message["type"] == "http.response.start":
                answer["status"] = message["status"]
            await send(message)
            if message["type"] == "http.response.body":
                answer["bytes"] += len(message.get("body", b""))
                if not message.get("more_body", False):
                    answer["ended_s"] = time.perf_counter()

        try:
            await self._app(scope, receive, send_counted)
        finally:
            duration_ms = ((answer["ended_s"] or time.perf_counter()) - started_s) * 1000.0
            _log(
                scope,
                status=answer["status"],
                duration_ms=duration_ms,
                response_bytes=answer["bytes"],
            )


def _log(scope: HTTPScope, *, status: int, duration_ms: float, response_bytes: int) -> None:
    # Routing and the guards left what they learnt on the scope (the state dict is shared with a HEAD's copy).
    state: dict[str, Any] = scope.get("state") or {}
    principal: Principal | None = state.get(PRINCIPAL_STATE_KEY)
    write_access_line(
        method=scope["method"],
        route=scope.get("path_template") or UNMATCHED_ROUTE,
        status=status,
        duration_ms=duration_ms,
        response_bytes=response_bytes,
        project=state.get(PROJECT_STATE_KEY),
        subject=None if principal is None or principal is ANONYMOUS else principal.subject,
    )


def write_access_line(  # noqa: PLR0913 - one argument per field of the line
    *,
    method: str | None,
    route: str,
    status: int,
    duration_ms: float,
    response_bytes: int,
    project: str | None = None,
    subject: str | None = None,
) -> None:
    """Log one request's line (the fields of the module's docstring), as the middleware and the protocol do."""
    fields = {
        "method": method,
        "route": route,
        "status": status,
        "duration_ms": round(duration_ms, 3),
        "response_bytes": response_bytes,
        "project": project,
        "subject": subject,
    }
    logger.info(
        "%s %s %s %.1f ms %d bytes project=%s subject=%s",
        *(fields[key] for key in ("method", "route", "status", "duration_ms", "response_bytes", "project", "subject")),
        extra=fields,
    )


def log_requests(app: Litestar) -> None:
    """Log each of `app`'s requests (`ACCESS_LOG_ENABLED`; see the module's docstring)."""
    app.asgi_handler = AccessLog(app.asgi_handler)
