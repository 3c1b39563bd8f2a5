"""A precondition a route cannot evaluate is a 400, never ignored: the caller's guard would have done nothing.

Only a document has a version the conditional headers can name (`app.api.entity_tags`), yet every
route took them: `If-Match: "999"` on `DELETE .../documents?tag=x` or on `DELETE /v1/projects/{p}` deleted
anyway, `If-None-Match: *` on a document's `DELETE` ("only if it does not exist") deleted the document, and
`If-Unmodified-Since` (no resource here has a modification date) was read nowhere. RFC 9110 (13.1.1) has a
server not perform a method whose precondition is false; a route that cannot tell says so with a 400 naming
the header. A GET keeps `If-None-Match` and `If-Modified-Since` it cannot evaluate: without a validator
their condition holds, and the answer is the one it would have been without them (13.1.2, 13.1.3).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from app.api.strict_queries import API_PATH_PREFIXES
from app.domain.errors import InvalidInputError

if TYPE_CHECKING:
    from collections.abc import Mapping

    from litestar import Litestar, Request
    from litestar.handlers import HTTPRouteHandler

PRECONDITIONS: Final = ("If-Match", "If-None-Match", "If-Unmodified-Since")
"""The conditional headers that guard a change; `If-Modified-Since` and `If-Range` only shape a read's answer."""
READ_METHODS: Final = frozenset({"GET", "HEAD"})
_HARMLESS_ON_READS: Final = frozenset({"if-none-match"})
DECLARED_PRECONDITIONS_STATE_KEY = "declared_preconditions"
"""Where the app's state keeps `declared_preconditions(app)` for the request hook."""


def declared_preconditions(app: Litestar) -> dict[HTTPRouteHandler, frozenset[str]]:
    """Per API route handler, the conditional headers its signature reads (lowercase)."""
    declared: dict[HTTPRouteHandler, frozenset[str]] = {}
    for route in app.routes:
        if not route.path.startswith(API_PATH_PREFIXES):
            continue
        for handler, kwargs_model in getattr(route, "route_handler_map", {}).values():
            declared[handler] = frozenset(
                parameter.field_alias.lower() for parameter in kwargs_model.expected_header_params
            )
    return declared


def refuse_unevaluated_preconditions(request: Request[Any, Any, Any]) -> None:
    """A 400 naming the first conditional header the route does not read (on a read, `If-None-Match` may stay)."""
    declared: Mapping[HTTPRouteHandler, frozenset[str]] = request.app.state.get(DECLARED_PRECONDITIONS_STATE_KEY, {})
    reads = declared.get(request.route_handler)
    if reads is None or request.method == "OPTIONS":
        return
    for header in PRECONDITIONS:
        name = header.lower()
        if name in reads or name not in request.headers:
            continue
        if name in _HARMLESS_ON_READS and request.method in READ_METHODS:
            continue
        msg = (
            f"{request.method} {request.url.path} cannot evaluate {header}: only a document has a version"
            " (its ETag), so If-Match and If-None-Match apply to GET, POST and DELETE of one document, and"
            " If-Unmodified-Since to nothing; send the request without it"
        )
        raise InvalidInputError(msg, field=header)
