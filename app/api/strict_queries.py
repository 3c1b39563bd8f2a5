"""Query strings are strict: a parameter the route does not declare is a 400, never silently ignored.

Litestar hands a handler the query parameters its signature declares and drops the rest, so
`GET /memory/query?query=x&project=p&min_score=0.5` answered as if `min_score` had not been sent (that
filter is a field of `POST /v1/search`): a setting accepted and ignored. The routes' declared names come
from Litestar's own kwargs models, read once when the app is built (`declared_query_parameters`). Only the
API's routes are strict (`API_PATH_PREFIXES`): the console, the OpenAPI pages, probes and `/metrics` take no
settings, and a bookmark's or a scraper's query string there harms nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from app.domain.errors import InvalidInputError

if TYPE_CHECKING:
    from collections.abc import Mapping

    from litestar import Litestar, Request
    from litestar.handlers import HTTPRouteHandler

API_PATH_PREFIXES = ("/memory/", "/v1/", "/admin/")
QUERY_PARAMETERS_STATE_KEY = "declared_query_parameters"
"""Where the app's state keeps `declared_query_parameters(app)` for the request hook."""


def declared_query_parameters(app: Litestar) -> dict[HTTPRouteHandler, frozenset[str]]:
    """Per API route handler, the query parameter names (aliases, as sent) its signature declares."""
    declared: dict[HTTPRouteHandler, frozenset[str]] = {}
    for route in app.routes:
        if not route.path.startswith(API_PATH_PREFIXES):
            continue
        for handler, kwargs_model in getattr(route, "route_handler_map", {}).values():
            declared[handler] = frozenset(parameter.field_alias for parameter in kwargs_model.expected_query_params)
    return declared


def reject_unknown_query_parameters(request: Request[Any, Any, Any]) -> None:
    """A 400 naming the first query parameter the request's route does not declare; nothing for other requests."""
    if not request.scope.get("query_string"):
        return
    declared: Mapping[HTTPRouteHandler, frozenset[str]] = request.app.state.get(QUERY_PARAMETERS_STATE_KEY, {})
    allowed = declared.get(request.route_handler)
    if allowed is None:
        return
    unknown = sorted(set(request.query_params) - allowed)
    if unknown:
        takes = ", ".join(sorted(allowed)) if allowed else "no query parameters"
        msg = f"unknown query parameter {unknown[0]!r}: {request.method} {request.url.path} takes {takes}"
        raise InvalidInputError(msg, field=unknown[0])
