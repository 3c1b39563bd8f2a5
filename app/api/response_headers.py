"""Headers every response carries: no content sniffing, no caching of API answers, a console nobody frames.

API answers hold a tenant's documents and search results, fetched with a bearer token: `Cache-Control:
no-store` keeps them out of browser and proxy caches (a document's `ETag` still works: conditional
requests are the client's, not a cache's). The console's page sets its content security policy in a
`<meta>` tag, where `frame-ancestors` has no effect: the header here forbids framing it (the page is
where a user pastes a token). The console's own files keep the caching their router gives them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from litestar.enums import ScopeType

from app.api.console import CONSOLE_PATH

if TYPE_CHECKING:
    from litestar import Litestar
    from litestar.types import ASGIApp, Message, Receive, Scope, Send

Headers = list[tuple[bytes, bytes]]

EVERY_RESPONSE: Final[Headers] = [(b"x-content-type-options", b"nosniff")]
API_RESPONSE: Final[Headers] = [(b"cache-control", b"no-store")]
CONSOLE_RESPONSE: Final[Headers] = [
    (
        b"content-security-policy",
        (
            b"default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
            b"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
        ),
    ),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
]


def with_headers(send: Send, extra: Headers, *, unless_set: Headers | None = None) -> Send:
    """`send`, adding headers to the response's start.

    `extra` replaces the response's headers of the same names; `unless_set` adds those it has no header of.
    """
    names = {name for name, _ in extra}

    async def send_with_headers(message: Message) -> None:
        if message["type"] == "http.response.start":
            kept = [(name, value) for name, value in message.get("headers", ()) if name.lower() not in names]
            present = {name.lower() for name, _ in kept}
            defaults = [(name, value) for name, value in unless_set or () if name not in present]
            message["headers"] = [*kept, *extra, *defaults]
        await send(message)

    return send_with_headers


class ResponseHeaders:
    """ASGI middleware: `EVERY_RESPONSE`, plus the console's or the API's own."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on; its response gets the headers of its kind."""
        if scope["type"] != ScopeType.HTTP:
            await self._app(scope, receive, send)
            return
        if scope["path"] == CONSOLE_PATH or scope["path"].startswith(f"{CONSOLE_PATH}/"):
            await self._app(scope, receive, with_headers(send, [*EVERY_RESPONSE, *CONSOLE_RESPONSE]))
        else:
            await self._app(scope, receive, with_headers(send, EVERY_RESPONSE, unless_set=API_RESPONSE))


def add_response_headers(app: Litestar) -> None:
    """Give every response of `app` its headers (before routing: 404s and 405s too)."""
    app.asgi_handler = ResponseHeaders(app.asgi_handler)
