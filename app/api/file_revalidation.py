"""Static files answer a revalidation: a GET whose `If-None-Match` or `If-Modified-Since` holds the file gets 304.

The console's files are sent `Cache-Control: no-cache` (a browser revalidates them on every load, so a redeploy
never leaves it on an old script) with an `ETag` and a `Last-Modified`, but Litestar's file response reads
neither conditional header: each revalidation was answered 200 with the whole file again, and `no-cache`
cost every load all its bytes. RFC 9110 (13.1.2, 13.1.3, 13.2.2): `If-None-Match` is compared weakly and,
when sent, decides alone; otherwise `If-Modified-Since` at or after `Last-Modified` is a 304. The 304 keeps
the headers 15.4.5 asks for and no body.
"""

from __future__ import annotations

from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Final

from litestar.enums import ScopeType

if TYPE_CHECKING:
    from collections.abc import Iterable

    from litestar.types import ASGIApp, Message, Receive, Scope, Send

KEPT_ON_NOT_MODIFIED: Final = frozenset(
    {b"cache-control", b"content-location", b"date", b"etag", b"expires", b"last-modified", b"vary"}
)
"""The headers a 304 carries of the 200 it stands for (RFC 9110, 15.4.5)."""


def _header(headers: Iterable[tuple[bytes, bytes]], name: bytes) -> str | None:
    values = [value.decode("latin-1") for key, value in headers if key.lower() == name]
    return ", ".join(values) if values else None


def _opaque(tag: str) -> str:
    return tag.strip().removeprefix("W/")


def is_unchanged(
    *, if_none_match: str | None, if_modified_since: str | None, etag: str | None, modified: str | None
) -> bool:
    """Whether the request's validators say the caller holds this file (so a 304 answers it)."""
    if if_none_match is not None:
        held = [item for item in if_none_match.split(",") if item.strip()]
        return any(item.strip() == "*" for item in held) or (
            etag is not None and any(_opaque(item) == _opaque(etag) for item in held)
        )
    if if_modified_since is None or modified is None:
        return False
    try:
        return parsedate_to_datetime(modified) <= parsedate_to_datetime(if_modified_since)
    except (TypeError, ValueError):
        return False  # a date that is no HTTP date is ignored (13.1.3)


class FileRevalidation:
    """ASGI middleware of a files router: a 200 the caller's validators match is sent as a 304 without its body."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on; turn its 200 into a 304 when `If-None-Match` or `If-Modified-Since` holds it."""
        headers = scope.get("headers", []) if scope["type"] == ScopeType.HTTP else []
        if_none_match, if_modified_since = _header(headers, b"if-none-match"), _header(headers, b"if-modified-since")
        if scope["type"] != ScopeType.HTTP or scope["method"] != "GET" or (if_none_match or if_modified_since) is None:
            await self._app(scope, receive, send)
            return
        not_modified = False
        body_ended = False

        async def send_revalidated(message: Message) -> None:
            nonlocal not_modified, body_ended
            if message["type"] == "http.response.start" and message["status"] == 200:  # noqa: PLR2004 - HTTP 200
                sent = list(message.get("headers", []))
                not_modified = is_unchanged(
                    if_none_match=if_none_match,
                    if_modified_since=if_modified_since,
                    etag=_header(sent, b"etag"),
                    modified=_header(sent, b"last-modified"),
                )
                if not_modified:
                    kept = [(name, value) for name, value in sent if name.lower() in KEPT_ON_NOT_MODIFIED]
                    await send({"type": "http.response.start", "status": 304, "headers": kept})
                    return
            if not_modified:
                if message["type"] == "http.response.body" and not message.get("more_body", False):
                    body_ended = True
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
                return  # the file's bytes: the caller holds them
            await send(message)

        await self._app(scope, receive, send_revalidated)
        if not_modified and not body_ended:  # a file sent by a server extension (zero-copy), not body messages
            await send({"type": "http.response.body", "body": b"", "more_body": False})
