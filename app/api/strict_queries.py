"""Query strings are strict: a parameter the route does not declare, or sends twice, is a 400, never ignored.

Litestar hands a handler the query parameters its signature declares and drops the rest, so
`GET /memory/query?query=x&project=p&min_score=0.5` answered as if `min_score` had not been sent (that
filter is a field of `POST /v1/search`): a setting accepted and ignored; and `tag=a&tag=b` kept one tag.
The routes' declared names come from Litestar's own kwargs models, read once when the app is built
(`declared_query_parameters`). Only the API's routes are strict (`API_PATH_PREFIXES`): the console, the
OpenAPI pages, probes and `/metrics` take no settings, and a bookmark's or a scraper's query string there
harms nothing.

A whole-number parameter (`limit`, `offset`) is written in digits, as a JSON body's is: Litestar read
`limit=5.0` as 5 and `limit=1e1` as 10, where `"limit": 5.0` in a body is a 400. A time parameter
(`event_time_from`, `event_time_to`, `updated_since`, `as_of`) is declared as text and read by
`request_time` in its route, as an RFC 3339 time: Litestar read a number as seconds since 1970, so
`?event_time_from=5` was 1970-01-01T00:00:05Z, and a delete by that filter deleted every document with an
event time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

import msgspec

from app.api.microsecond_times import truncated_time_text
from app.api.strict_bodies import readable_validation_message, shown_value
from app.domain.errors import InvalidInputError

if TYPE_CHECKING:
    from collections.abc import Mapping

    from litestar import Litestar, Request
    from litestar.handlers import HTTPRouteHandler

API_PATH_PREFIXES = ("/memory/", "/v1/", "/admin/")
_WHOLE_NUMBER: Final = re.compile(r"-?[0-9]+")
_SHOWN_CHARS: Final = 40
QUERY_PARAMETERS_STATE_KEY = "declared_query_parameters"
"""Where the app's state keeps `declared_query_parameters(app)` for the request hook."""


@dataclass(frozen=True, slots=True)
class DeclaredQuery:
    """The query parameters one route handler declares (as sent), those that take several values, and numbers."""

    names: frozenset[str]
    repeatable: frozenset[str]
    integers: frozenset[str] = frozenset()


def _takes(handler: HTTPRouteHandler, field_name: str, kind: type) -> bool:
    """Whether the handler's parameter is a `kind` (or `kind | None`); for `int`, a `bool` is not."""
    field = handler.parsed_fn_signature.parameters.get(field_name)
    if field is None:
        return False
    annotations = [inner.annotation for inner in field.inner_types] if field.is_union else [field.annotation]
    return kind in annotations


def declared_query_parameters(app: Litestar) -> dict[HTTPRouteHandler, DeclaredQuery]:
    """Per API route handler, the query parameters its signature declares."""
    declared: dict[HTTPRouteHandler, DeclaredQuery] = {}
    for route in app.routes:
        if not route.path.startswith(API_PATH_PREFIXES):
            continue
        for handler, kwargs_model in getattr(route, "route_handler_map", {}).values():
            if handler.http_methods == {"OPTIONS"}:
                continue  # asks what the path takes: a query string changes nothing (a CORS preflight sends one)
            parameters = kwargs_model.expected_query_params
            declared[handler] = DeclaredQuery(
                names=frozenset(parameter.field_alias for parameter in parameters),
                repeatable=frozenset(parameter.field_alias for parameter in parameters if parameter.is_sequence),
                integers=frozenset(
                    parameter.field_alias for parameter in parameters if _takes(handler, parameter.field_name, int)
                ),
            )
    return declared


def reject_unknown_query_parameters(request: Request[Any, Any, Any]) -> None:
    """A 400 naming the first undeclared query parameter, one sent twice that takes one value, or a bad number.

    A whole number (`int` parameter) must be written in digits; times are the routes' own (`request_time`).

    Nothing for routes outside the API or requests without a query string.
    """
    if not request.scope.get("query_string"):
        return
    declared: Mapping[HTTPRouteHandler, DeclaredQuery] = request.app.state.get(QUERY_PARAMETERS_STATE_KEY, {})
    query = declared.get(request.route_handler)
    if query is None:
        return
    sent = request.query_params
    unknown = sorted(set(sent) - query.names)
    if unknown:
        takes = ", ".join(sorted(query.names)) if query.names else "no query parameters"
        msg = f"unknown query parameter {unknown[0]!r}: {request.method} {request.url.path} takes {takes}"
        raise InvalidInputError(msg, field=unknown[0])
    repeated = sorted(name for name in set(sent) - query.repeatable if len(sent.getall(name)) > 1)
    if repeated:
        msg = f"query parameter {repeated[0]!r} is sent {len(sent.getall(repeated[0]))} times; it takes one value"
        raise InvalidInputError(msg, field=repeated[0])
    for name in sorted(query.integers & set(sent)):
        text = sent[name]
        if not _WHOLE_NUMBER.fullmatch(text):
            shown = text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + "..."
            msg = f"{name} must be a whole number written in digits, e.g. 10; got {shown!r}"
            raise InvalidInputError(msg, field=name)


def request_time(text: str, *, field: str, time_type: Any = datetime) -> datetime:  # noqa: ANN401 - a datetime type, constrained (`AsOf`) or not
    """A query string's time, read as a JSON body's is: RFC 3339, digits past the microsecond dropped, never rounded.

    A 400 naming `field` otherwise (a number too: the framework read one as seconds since 1970). `time_type`
    is the field's type, so a constrained one (an offset required, `AsOf`) is checked as in a body. Every
    route takes its query-string times through here, so one text gets one answer wherever it is sent.
    """
    try:
        time: datetime = msgspec.convert(truncated_time_text(text), time_type)
    except msgspec.ValidationError as error:
        # A `+` offset not percent-encoded arrives as a space: "I did send an offset" needs the value shown.
        hint = "; a `+` in a query string reads as a space: send it as %2B" if " " in text else ""
        msg = f"{field}: {readable_validation_message(str(error))}; got {shown_value(text)}{hint}"
        raise InvalidInputError(msg, field=field) from None
    return time
