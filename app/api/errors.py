"""The one place that knows HTTP status codes: errors become RFC 9457 problem+json bodies."""

from __future__ import annotations

import logging
from http import HTTPStatus
from typing import Annotated, Any
from urllib.parse import quote

import msgspec
from litestar import Request, Response
from litestar.exceptions import HTTPException, ValidationException
from litestar.handlers import HTTPRouteHandler
from litestar.openapi.datastructures import ResponseSpec
from litestar.status_codes import HTTP_413_REQUEST_ENTITY_TOO_LARGE, HTTP_500_INTERNAL_SERVER_ERROR

from app.api.strict_bodies import readable_validation_message, shown_value
from app.domain.errors import (
    AllEnginesFailedError,
    AuthenticationError,
    DocumentNotFoundError,
    DocumentTooLargeError,
    EngineError,
    EngineStorageFullError,
    EngineTimeoutError,
    EngineUnavailableError,
    IngestionError,
    InvalidInputError,
    PermissionDeniedError,
    RateLimitedError,
    SearchServiceError,
    VersionConflictError,
)
from app.observability.logs import ThrottledLog
from app.observability.metrics import record_engine_error

logger = logging.getLogger("poimen.api")
FAILURE_LOG_INTERVAL_S = 10.0
"""While an engine is down every request fails alike: one line per kind of failure this often, with a count."""
FAILURE_LOG_STATE_KEY = "failure_log"


def failure_log() -> ThrottledLog:
    """A new app's log of failed requests (`app.state[FAILURE_LOG_STATE_KEY]`; each app counts its own bursts)."""
    return ThrottledLog(logger, interval_s=FAILURE_LOG_INTERVAL_S)


REFUSED_STATUS_DESCRIPTION = (
    "On a 429 only: the request's token was refused (401: not accepted, 403: no grant for this project or scope)"
    " and its client address is past RATE_LIMIT_REFUSED_AUTH_PER_ADDRESS_RPS. Sending it again with the same"
    " token cannot succeed and spends the address's refusals: fix the token"
)


class ProblemOut(msgspec.Struct, kw_only=True):
    """An RFC 9457 problem+json error body, as this module writes it.

    `field`/`fields` name the offending input of a 400; `reasons` lists why each engine failed on a 503;
    `refused_status` marks a 429 that is a refused authentication (below).
    """

    type: str
    title: str
    status: int
    detail: str
    field: str | None = None
    fields: list[str] | None = None
    reasons: list[str] | None = None
    engine: str | None = None
    document_id: str | None = None
    current_version: int | None = None
    refused_status: Annotated[int | None, msgspec.Meta(description=REFUSED_STATUS_DESCRIPTION)] = None


PROBLEM_MEDIA_TYPE = "application/problem+json"
RETRY_AFTER_S = 1
"""Seconds a 503 tells the caller to wait: engines come back, or the load drains, in about that time."""

_STATUS_BY_ERROR: tuple[tuple[type[SearchServiceError], int, str], ...] = (
    (DocumentTooLargeError, 413, "Document too large"),
    (InvalidInputError, 400, "Invalid request"),
    (AuthenticationError, 401, "Unauthorized"),
    (PermissionDeniedError, 403, "Forbidden"),
    (DocumentNotFoundError, 404, "Not found"),
    (VersionConflictError, 409, "Version conflict"),
    (RateLimitedError, 429, "Too many requests"),
    (AllEnginesFailedError, 503, "Search unavailable"),
    (EngineTimeoutError, 504, "Engine timed out"),
    (EngineStorageFullError, 507, "Insufficient storage"),
    (EngineError, 503, "Engine unavailable"),
    (IngestionError, 503, "Ingestion failed"),
)


_PROBLEM_DESCRIPTIONS: dict[int, str] = {
    400: "Invalid input; `field` (and `fields`) name the offending parameters",
    401: "No valid bearer token (with AUTH_MODE=jwt); `WWW-Authenticate` says how to authenticate",
    403: "The token's scopes or projects do not cover this request",
    404: "No such document in the project",
    409: "The stored version is not the expected one; `current_version` is the stored one",
    413: "The request body, or a document in it, is larger than the service accepts",
    415: (
        "The body is sent in a content coding (`Content-Encoding: gzip`; `Accept-Encoding: identity` says what is"
        " read) or labelled a charset other than UTF-8: send plain UTF-8 JSON"
    ),
    429: (
        "Over this caller's rate (RATE_LIMIT_PER_CALLER_RPS), or a refused token from an address past its refused "
        "authentications (RATE_LIMIT_REFUSED_AUTH_PER_ADDRESS_RPS), marked by `refused_status` (401 or 403): not"
        " worth sending again with the same token; `Retry-After` says when to come back"
    ),
    503: "An engine is unavailable (`engine` names it; `reasons`: why each search leg failed), or the service "
    "is shedding load; `Retry-After` says when to retry",
    504: "An engine did not answer in time; `engine` names it; `Retry-After` says when to retry",
    507: "The database has no space left to write; `engine` names it. Not worth retrying until an operator "
    "frees or adds space (no `Retry-After`)",
}


def logged_path(request: Request[Any, Any, Any]) -> str:
    """The request's path as the client sent it, still percent-encoded, for a log line.

    Decoded, a `%0A` in it wrote a line of the caller's choosing into a plain-text log.
    """
    raw = request.scope.get("raw_path")
    return raw.decode("latin-1") if isinstance(raw, bytes) else quote(request.url.path, safe="/")


def problem_responses(*statuses: int) -> dict[int, ResponseSpec]:
    """The `responses=` of a route: each error status it can answer, documented as problem+json `ProblemOut`.

    Every guarded route can also answer 429 (its caller's rate, or its address's refused authentications) and
    503 (load shedding): always added.
    """
    return {
        status: ResponseSpec(
            data_container=ProblemOut, media_type=PROBLEM_MEDIA_TYPE, description=_PROBLEM_DESCRIPTIONS[status]
        )
        for status in sorted({*statuses, 429, 503})
    }


def problem(
    status: int,
    title: str,
    detail: str,
    *,
    retry_after_s: int | None = None,
    headers: dict[str, str] | None = None,
    **extra: Any,  # noqa: ANN401 - JSON members
) -> Response[dict[str, Any]]:
    """A problem+json response; 503s, 504s and 429s say when to retry (`Retry-After`, 1 s unless given)."""
    body: dict[str, Any] = {"type": "about:blank", "title": title, "status": status, "detail": detail}
    body.update({key: value for key, value in extra.items() if value is not None})
    headers = dict(headers or {})
    if status == 401:  # noqa: PLR2004
        headers["WWW-Authenticate"] = 'Bearer realm="poimen"'
    if status in {429, 503, 504}:  # 504: the engine may answer in time on a later try
        headers.setdefault("Retry-After", str(retry_after_s or RETRY_AFTER_S))
    return Response(body, status_code=status, media_type=PROBLEM_MEDIA_TYPE, headers=headers or None)


def unavailable_detail(engine: str) -> str:
    """What a caller is told of an engine that failed its request: the cause goes to the log only.

    The cause is the driver's or the engine's own words (a database host, a table, a folder of the
    server's disk), which are the operator's business, not every caller's.
    """
    return f"the {engine} engine failed this request; retry later (the service's log has the cause, by request id)"


def _status_of(error: SearchServiceError) -> int | None:
    return next((status for error_type, status, _ in _STATUS_BY_ERROR if isinstance(error, error_type)), None)


def service_error_handler(request: Request[Any, Any, Any], error: SearchServiceError) -> Response[dict[str, Any]]:
    """Map the domain error tree to HTTP; a 5xx (an engine failed the request) is also logged, throttled.

    An `EngineError` that fails the request (a write, delete or reindex PostgreSQL refused, a read of a
    document) is counted in `poimen_engine_errors_total` here, once; search legs count their own failures
    and degrade instead of raising one.
    """
    if isinstance(error, EngineError):
        record_engine_error(error.engine)
    for error_type, status, title in _STATUS_BY_ERROR:
        if isinstance(error, error_type):
            if status >= HTTP_500_INTERNAL_SERVER_ERROR:
                engine = error.engine if isinstance(error, EngineError) else ""
                request.app.state[FAILURE_LOG_STATE_KEY].report(
                    f"{status} {title} {engine}",
                    "%s %s answered %d %s: %s",
                    request.method,
                    logged_path(request),
                    status,
                    title,
                    error.message,
                )
            extra: dict[str, Any] = {}
            if isinstance(error, InvalidInputError):
                extra["field"] = error.field
            if isinstance(error, AllEnginesFailedError):
                extra["reasons"] = list(error.reasons)
            detail = error.message
            if isinstance(error, EngineError):
                extra["engine"] = error.engine
                if isinstance(error, EngineUnavailableError):
                    detail = unavailable_detail(error.engine)
            if isinstance(error, RateLimitedError):
                refused_status = None if error.refusal is None else _status_of(error.refusal)
                return problem(
                    status, title, error.message, retry_after_s=error.retry_after_s, refused_status=refused_status
                )
            if isinstance(error, VersionConflictError):
                extra["document_id"] = error.document_id
                extra["current_version"] = error.current_version
            return problem(status, title, detail, **extra)
    logger.error("unmapped service error %s", type(error).__name__)
    return problem(HTTP_500_INTERNAL_SERVER_ERROR, "Internal error", "unexpected service error")


_BODY_KEY = "data"
_UNKNOWN_FIELD = "unknown field `"
_NAMED_FIELD_MESSAGES = ("missing required field `", _UNKNOWN_FIELD)


def _field_name(key: str, message: str) -> str:
    """The offending field: Litestar's key, or for whole-body errors the field msgspec names in backticks.

    A body error without a path ("Object missing required field `query`") comes keyed by the handler's
    `data` parameter, which tells the caller nothing; the message names the real field.
    """
    named = next((message.split(m, 1)[1].split("`", 1)[0] for m in _NAMED_FIELD_MESSAGES if m in message), None)
    if key in {"", _BODY_KEY}:
        return named or key
    # An unknown field inside an object ("... unknown field `colour` - at `$.queries[0]`"): name the field.
    if named is not None and _UNKNOWN_FIELD in message:
        return f"{key}.{named}"
    return key


def validation_error_handler(request: Request[Any, Any, Any], error: ValidationException) -> Response[dict[str, Any]]:
    """Request validation failures: 400 naming the offending fields, and a query parameter's value as sent."""
    fields: list[str] = []
    messages: list[str] = []
    if isinstance(error.extra, list):
        for item in error.extra:
            if isinstance(item, dict):
                message = readable_validation_message(str(item.get("message") or ""))
                key = _field_name(str(item.get("key") or ""), message)
                if key:
                    fields.append(key)
                sent = request.query_params.get(key) if key else None
                if sent is not None and "got " not in message:  # as a body's refusal shows it (`received`)
                    message = f"{message}; got {shown_value(sent)}"
                messages.append(f"{key}: {message}" if key else message)
    detail = "; ".join(messages) or error.detail or "invalid request"
    return problem(400, "Invalid request", detail, field=fields[0] if fields else None, fields=fields or None)


def http_error_handler(request: Request[Any, Any, Any], error: HTTPException) -> Response[dict[str, Any]]:
    """Framework HTTP errors (404 route, 405, 413 body size) as problem+json, keeping their headers (405: `Allow`).

    Titled by their status ("Method not allowed"), as the service's own problems are, not by the
    framework's class name (`MethodNotAllowedException`). A body over the request limit says the limit (it
    said "Request Entity Too Large", whatever the limit and however far past it).
    """
    detail = error.detail
    handler = request.scope.get("route_handler") if error.status_code == HTTP_413_REQUEST_ENTITY_TOO_LARGE else None
    limit = handler.resolve_request_max_body_size() if isinstance(handler, HTTPRouteHandler) else None
    if limit:
        detail = (
            f"the request body is over {limit} bytes ({limit / 2**20:g} MiB), the most one request may carry: "
            "split it into smaller requests (fewer documents per request)"
        )
    return problem(error.status_code, framework_title(error.status_code), detail, headers=error.headers or None)


def framework_title(status: int) -> str:
    """The title of a framework error's problem: the status phrase in sentence case; 400 as the service's own."""
    if status == HTTPStatus.BAD_REQUEST:
        return "Invalid request"
    if status == HTTPStatus.REQUEST_URI_TOO_LONG:
        return "URI too long"  # RFC 9110's phrase; Python keeps RFC 2616's "Request-URI Too Long"
    try:
        return HTTPStatus(status).phrase.capitalize()
    except ValueError:
        return "Error"


def unexpected_error_handler(request: Request[Any, Any, Any], error: Exception) -> Response[dict[str, Any]]:
    """Anything unexpected: log it with its type, answer 500 without a stack trace."""
    logger.error(
        "unhandled error on %s %s: %s", request.method, logged_path(request), type(error).__name__, exc_info=error
    )
    return problem(HTTP_500_INTERNAL_SERVER_ERROR, "Internal error", "unexpected error; see server logs")
