"""Methods as RFC 9110 has them: HEAD wherever GET is, and `Allow` naming every method of a path.

- HEAD was a 405 on every route but the console's (`HEAD /healthz`, a document): "all general-purpose servers
  MUST support the methods GET and HEAD" (9.1). A HEAD is answered as its GET, headers included, without
  the body (9.3.2).
- `OPTIONS` named one handler's methods only (`OPTIONS .../documents/{id}`: `GET, OPTIONS`, no DELETE), as
  Litestar 2 builds its answer for the first handler of a path (litestar-org/litestar#4169). It and a 405's
  `Allow` now name every method the path takes, HEAD with GET, sorted (a 405's order changed between runs).
- An HTTP/1.1 request without exactly one non-empty `Host` was served: RFC 9112 (3.2) has a server answer
  it 400, since a proxy and the service could then read two different targets from one request.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Final

from litestar.enums import ScopeType
from litestar.routes import HTTPRoute

from app.api.errors import PROBLEM_MEDIA_TYPE, framework_title

if TYPE_CHECKING:
    from collections.abc import Mapping

    from litestar import Litestar, Request
    from litestar.types import ASGIApp, HTTPScope, Message, Receive, Scope, Send

_ROUTING_KEYS: Final = ("route_handler", "path_template", "path_params")
"""What routing sets on the scope it is given, for the middleware around this one (tracing names spans by it)."""
SENT_METHOD_STATE_KEY: Final = "sent_method"
"""Set on a HEAD routed as its GET: the method the client sent (`sent_method`)."""


def sent_method(request: Request[Any, Any, Any]) -> str:
    """The method the client sent: HEAD for a HEAD served as its GET, else the request's own.

    The HTTP metrics' `method` label: Litestar's middleware sees the routed copy, and counted every HEAD
    (a load balancer's health check) as a GET.
    """
    sent: str = (request.scope.get("state") or {}).get(SENT_METHOD_STATE_KEY, request.method)
    return sent


class MethodSemantics:
    """ASGI middleware: HEAD as GET without the body; `Allow` of an OPTIONS answer or a 405 made whole."""

    def __init__(self, app: ASGIApp, *, methods_by_path: Mapping[str, frozenset[str]]) -> None:
        self._app = app
        self._methods_by_path = methods_by_path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse a request without one `Host`; route a HEAD as its GET; complete the `Allow` of the answer."""
        if scope["type"] != ScopeType.HTTP:
            await self._app(scope, receive, send)
            return
        if not _names_one_host(scope):
            await _bad_request(send, "an HTTP/1.1 request carries exactly one Host header, not empty (RFC 9112, 3.2)")
            return
        if scope["method"] != "HEAD":
            await self._app(scope, receive, self._allowing(scope, send))
            return
        # A copy: the server reads the method from its own scope, and leaves out a HEAD answer's body by it.
        # The state stays shared: the metrics read the method sent from it, the access log the guards' findings.
        scope.setdefault("state", {})[SENT_METHOD_STATE_KEY] = "HEAD"
        routed: HTTPScope = {**scope, "method": "GET"}
        await self._app(routed, receive, self._allowing(routed, _without_body(send)))
        for key in _ROUTING_KEYS:
            if key in routed:
                scope[key] = routed[key]

    def _allowing(self, scope: Scope, send: Send) -> Send:
        async def send_allowing(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] in {204, 405}:
                options = scope.get("method") == "OPTIONS"
                allowed = self._methods_by_path.get(scope.get("path_template", "")) if options else None
                message["headers"] = _with_allow(list(message.get("headers", ())), allowed)
            await send(message)

        return send_allowing


def _names_one_host(scope: Scope) -> bool:
    if scope.get("http_version") != "1.1":
        return True  # HTTP/1.0 may leave it out
    hosts = [value for name, value in scope["headers"] if name == b"host"]
    return len(hosts) == 1 and bool(hosts[0].strip())


def _with_allow(headers: list[tuple[bytes, bytes]], allowed: frozenset[str] | None) -> list[tuple[bytes, bytes]]:
    """`headers` with `Allow` as `allowed` (when given) or as it was, HEAD added beside GET, sorted."""
    current = next((value for name, value in headers if name.lower() == b"allow"), None)
    if current is None:
        return headers  # a 204 of a handler's own, not an OPTIONS answer
    methods = set(allowed) if allowed is not None else {m.strip() for m in current.decode("latin-1").split(",")}
    if "GET" in methods:
        methods.add("HEAD")
    value = ", ".join(sorted(method for method in methods if method)).encode("latin-1")
    return [*((name, v) for name, v in headers if name.lower() != b"allow"), (b"allow", value)]


def _without_body(send: Send) -> Send:
    async def send_head(message: Message) -> None:
        if message["type"] == "http.response.body":
            if message.get("more_body", False):
                return
            message = {"type": "http.response.body", "body": b"", "more_body": False}
        await send(message)

    return send_head


async def _bad_request(send: Send, detail: str) -> None:
    body = json.dumps({"type": "about:blank", "title": framework_title(400), "status": 400, "detail": detail})
    encoded = body.encode()
    headers = [
        (b"content-type", PROBLEM_MEDIA_TYPE.encode()),
        (b"content-length", str(len(encoded)).encode()),
        (b"connection", b"close"),
    ]
    await send({"type": "http.response.start", "status": 400, "headers": headers})
    await send({"type": "http.response.body", "body": encoded, "more_body": False})


def methods_by_path(app: Litestar) -> dict[str, frozenset[str]]:
    """Every HTTP method each route path of `app` takes, by the path's template (as routing names it)."""
    found: dict[str, set[str]] = {}
    for route in app.routes:
        if isinstance(route, HTTPRoute):
            found.setdefault(route.path_format, set()).update(route.methods)
    return {path: frozenset(methods) for path, methods in found.items()}


def complete_methods(app: Litestar) -> None:
    """Give `app` HEAD on its GET routes and whole `Allow` headers (call once its routes are all registered)."""
    app.asgi_handler = MethodSemantics(app.asgi_handler, methods_by_path=methods_by_path(app))
