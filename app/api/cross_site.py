"""Refusing cross-site browser requests while the service runs without authentication (`AUTH_MODE=off`).

With no token to present, the loopback default could be written by any web page its user opens: a browser
sends a "simple" cross-site POST (`Content-Type: text/plain`, no custom header) without a preflight, and the
service decodes the JSON whatever the type, so a page could plant memories for an agent to recall. Every
browser names the page's origin in `Origin` on such a request; a request whose `Origin` is not the service's
own (the `Host` it was sent to) is refused before any handler runs. Clients that are not browsers send no
`Origin` and are unaffected, and so is the console, which the service serves from its own origin.
With `AUTH_MODE=jwt` no check is needed: a browser cannot send `Authorization` across sites without a CORS
preflight, which the service never grants.

The Origin check alone does not stop DNS rebinding: a page at `attacker.example` whose name is re-pointed at
127.0.0.1 is then same-origin with the service. Without auth the service binds loopback only, so every
legitimate request names a loopback host (`localhost`, a `*.localhost` name, 127.0.0.0/8 or `[::1]`); a request
naming any other `Host` is refused too.
"""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from app.domain.errors import PermissionDeniedError

if TYPE_CHECKING:
    from litestar import Request


def refuse_cross_site(request: Request[Any, Any, Any]) -> None:
    """Raise `PermissionDeniedError` when the `Host` is not a loopback name or the `Origin` is another site."""
    host = request.headers.get("host", "").strip().lower().removesuffix(":80").removesuffix(":443")
    if host and not _names_loopback(host):
        msg = (
            "while AUTH_MODE=off the service answers only requests sent to a loopback name (localhost, "
            "127.0.0.1, [::1]); this request was sent to another host name, as a DNS-rebinding page would be"
        )
        raise PermissionDeniedError(msg)
    origin = request.headers.get("origin")
    if origin is None:
        return
    if not host or _origin_host(origin) != host:
        msg = (
            "cross-site browser requests are refused while AUTH_MODE=off (the request's Origin is not this "
            "service): use the console this service serves, or run with AUTH_MODE=jwt"
        )
        raise PermissionDeniedError(msg)


def _origin_host(origin: str) -> str | None:
    """The `host[:port]` of an `Origin` as a `Host` header names it; None for `null` or anything unreadable."""
    try:
        parts = urlsplit(origin.strip())
        hostname, port = parts.hostname, parts.port
    except ValueError:
        return None
    if parts.scheme not in {"http", "https"} or not hostname:
        return None
    default_port = 443 if parts.scheme == "https" else 80
    shown = f"[{hostname}]" if ":" in hostname else hostname
    return shown if port in {None, default_port} else f"{shown}:{port}"


def _names_loopback(host: str) -> bool:
    """Whether a `Host` header names this machine's loopback: `localhost`, `*.localhost` or a loopback address.

    Browsers resolve `localhost` and its subdomains to loopback themselves (RFC 6761), so no page can re-point
    them; an IP literal cannot be re-pointed at all.
    """
    try:
        hostname = urlsplit(f"//{host}").hostname
    except ValueError:
        return False
    if not hostname:
        return False
    if hostname == "localhost" or hostname.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(hostname).is_loopback
    except ValueError:
        return False
