"""The client's error tree: one root, one class per kind of answer a caller handles differently.

`error_from_response()` is the one place that maps an HTTP answer to an error; it reads the service's
problem+json body (`detail`, `field`, `reasons`, `current_version`) into attributes and a message that
says what went wrong and where, without the token.
"""

from __future__ import annotations

import base64
import binascii
import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, ClassVar, Final

import msgspec

from poimen_client.models import Problem

if TYPE_CHECKING:
    import httpx

BODY_EXCERPT_CHARS: Final = 200


class PoimenError(Exception):
    """Root of every error this client raises."""


class TransportError(PoimenError):
    """The service could not be reached, or did not answer in time; no HTTP answer arrived."""


class DeadlineExceededError(TransportError, TimeoutError):
    """The call's deadline (`deadline_s`) passed before it had an answer; no send is begun or waited for past it.

    Raised before a retry whose wait (backoff or `Retry-After`) would end past the deadline, with no sleep, and
    when a send is still unanswered at the deadline. `sends` counts the sends made. `last_error` is the error
    of the last send that ended and was to be retried (a 503, a refused connection; the `__cause__` when the
    deadline stopped a wait), None when none had ended. After a write's send was cut off its outcome is
    unknown, as after any timeout: read the document before sending it again. A `TimeoutError` as well, as
    `asyncio.timeout` raises.
    """

    def __init__(self, message: str, *, deadline_s: float, sends: int, last_error: PoimenError | None) -> None:
        super().__init__(message)
        self.deadline_s = deadline_s
        self.sends = sends
        self.last_error = last_error


class UnexpectedAnswerError(PoimenError):
    """An answer this client cannot read.

    A success body that does not have the shape this client knows (a service of another version?), or any
    body its `Content-Encoding` does not decode (a broken proxy).
    """


class ServiceError(PoimenError):
    """The service answered with an error status.

    `status` is the HTTP status, `problem` the decoded problem+json body (fields empty when the body was
    not one, e.g. from a proxy), `retry_after_s` the `Retry-After` header in seconds when there was one,
    `request_id` the service's `X-Request-Id` for the request (what its log lines carry; quote it to the
    people running the service).
    """

    status_codes: ClassVar[frozenset[int]] = frozenset()
    """The statuses this class stands for (`error_from_response` picks by it)."""

    def __init__(
        self,
        message: str,
        *,
        status: int,
        problem: Problem,
        retry_after_s: float | None = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.problem = problem
        self.retry_after_s = retry_after_s
        self.request_id = request_id

    @property
    def detail(self) -> str:
        """The service's explanation."""
        return self.problem.detail


class InvalidRequestError(ServiceError):
    """400: the request was malformed; `field` names the offending input (`fields` every one).

    Also 415: a body sent with a `Content-Encoding`, or labelled a charset other than UTF-8 (this client sends neither);
    406: an `Accept` header admitting no type the route answers (this client asks for JSON; a `headers=` or a proxy
    may change it).
    """

    status_codes = frozenset({400, 406, 415, 422})

    @property
    def field(self) -> str | None:
        """The first offending field, e.g. `queries[0].limit` or `cursor`."""
        return self.problem.field

    @property
    def fields(self) -> list[str]:
        """Every offending field the service named."""
        return self.problem.fields or ([self.problem.field] if self.problem.field else [])


class PayloadTooLargeError(InvalidRequestError):
    """413: a document (or the whole body) is over the service's size limit; 414: the URL is; 431: the headers are."""

    status_codes = frozenset({413, 414, 431})


class RequestTimeoutError(ServiceError):
    """408: the service (or a proxy) cut the request off because it did not arrive in time.

    Its head (request line and headers) was not whole within the service's head timeout, or its body came
    slower than the service's minimum rate (20 s, then 16 KiB/s). Not the client's own timeout: that is a
    `TransportError`. Not retried: the connection was closed partway through the request, and the same
    request over as slow a link would be cut off again. The service did nothing with it (nothing was written);
    send it again once the link is faster, or send less per request (fewer documents).
    """

    status_codes = frozenset({408})


class UnauthorizedError(ServiceError):
    """401: no token, or one the service does not accept (expired, wrong key, malformed).

    Also a 429 whose body says the token was refused with a 401 (`problem.refused_status`): the client
    address is past the service's refused authentications, `retry_after_s` says when it may try again.
    Never retried: the same token would be refused again, and every refusal prolongs the lock-out.
    """

    status_codes = frozenset({401})


class ForbiddenError(ServiceError):
    """403: the token is valid but does not grant this project or scope.

    Also a 429 for such a refusal from a client address past its refused authentications (as `UnauthorizedError`).
    """

    status_codes = frozenset({403})


class NotFoundError(ServiceError):
    """404: no such document (or no such route: check the base URL)."""

    status_codes = frozenset({404})


class ConflictError(ServiceError):
    """409: the stored document is at another version than the one the write expected."""

    status_codes = frozenset({409})

    @property
    def current_version(self) -> int | None:
        """The version the service holds now (None: the document does not exist)."""
        return self.problem.current_version

    @property
    def document_id(self) -> str | None:
        """The document whose version did not match."""
        return self.problem.document_id


class UnavailableError(ServiceError):
    """502, 503 or 504: the service or its engines cannot answer now.

    `engine` names the engine that failed the request, `reasons` says why each engine of a search failed.
    """

    status_codes = frozenset({502, 503, 504})

    @property
    def engine(self) -> str | None:
        """The engine that failed the request (`pgvector`, `tantivy`, ...), when the service named one."""
        return self.problem.engine

    @property
    def reasons(self) -> list[str]:
        """One reason per failed engine, when the service gave them."""
        return self.problem.reasons or []


class StorageFullError(UnavailableError):
    """507: the engine `engine` (the database) has no space left to write.

    Not retried: the service sends no `Retry-After`, as nothing changes until an operator frees or adds space.
    """

    status_codes = frozenset({507})


class RateLimitedError(UnavailableError):
    """429: too many requests; `retry_after_s` says when to come back.

    A 429 for a refused token is an `UnauthorizedError` or a `ForbiddenError` instead (`refused_status`).
    """

    status_codes = frozenset({429})


_ERROR_CLASSES: Final[tuple[type[ServiceError], ...]] = (
    PayloadTooLargeError,
    InvalidRequestError,
    RequestTimeoutError,
    UnauthorizedError,
    ForbiddenError,
    NotFoundError,
    ConflictError,
    RateLimitedError,
    StorageFullError,
    UnavailableError,
)


def error_from_response(response: httpx.Response, *, retry_after_s: float | None = None) -> ServiceError:
    """The error an answer with an error status stands for, its message naming the request."""
    problem = _problem_of(response)
    status = refused_status(response, problem) or response.status_code
    error_class = next((c for c in _ERROR_CLASSES if status in c.status_codes), ServiceError)
    request = response.request
    parts = [f"{response.status_code} {problem.title or response.reason_phrase} on {request.method} {request.url.path}"]
    parts.append(f": {problem.detail}" if problem.detail else "")
    parts.extend(_hints(problem, response, retry_after_s=retry_after_s))
    request_id = response.headers.get("x-request-id")
    if request_id:
        parts.append(f" [request id: {request_id}]")
    return error_class(
        "".join(parts),
        status=response.status_code,
        problem=problem,
        retry_after_s=retry_after_s,
        request_id=request_id,
    )


def refused_status(response: httpx.Response, problem: Problem | None = None) -> int | None:
    """401 or 403 when `response` is a 429 for a refused token (the service's `refused_status`); else None.

    The service answers a refusal with 429 once the client address is past its refused authentications.
    Sending it again with the same token cannot succeed and only prolongs the lock-out.
    """
    if response.status_code != 429:  # noqa: PLR2004 - HTTP 429
        return None
    found = (problem or _problem_of(response)).refused_status
    return found if found in REFUSAL_STATUSES else None


REFUSAL_STATUSES: Final = frozenset({401, 403})


def _problem_of(response: httpx.Response) -> Problem:
    try:
        return msgspec.json.decode(response.content, type=Problem)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):  # RecursionError: JSON nested deep
        excerpt = response.text[:BODY_EXCERPT_CHARS].strip()
        return Problem(status=response.status_code, detail=f"(not a problem+json body) {excerpt}".strip())


def _hints(problem: Problem, response: httpx.Response, *, retry_after_s: float | None) -> list[str]:
    hints = []
    if problem.fields and len(problem.fields) > 1:
        hints.append(f" [fields: {', '.join(problem.fields)}]")
    elif problem.field:
        hints.append(f" [field: {problem.field}]")
    if problem.current_version is not None:
        hints.append(f" [current_version: {problem.current_version}]")
    if problem.engine:
        hints.append(f" [engine: {problem.engine}]")
    if problem.reasons:
        hints.append(f" [reasons: {'; '.join(problem.reasons)}]")
    if retry_after_s is not None:
        hints.append(f" [retry after {retry_after_s:g} s]")
    if problem.refused_status in REFUSAL_STATUSES:
        hints.append(f" (the token was refused: {problem.refused_status}; not retried, the same token cannot pass)")
    if response.status_code == 401 or problem.refused_status == 401:  # noqa: PLR2004 - HTTP 401
        hints.append(_token_hint(response.request.headers.get("authorization")))
    return hints


def _token_hint(authorization: str | None) -> str:
    """Why a 401 is likely: no token sent, or the token's own `exp` has passed (read, never verified).

    Never raises, whatever the token holds: it explains an error already being raised. Never quotes the token.
    """
    if not authorization:
        return " (no token was sent: pass token=... to the client)"
    claims = _unverified_claims(authorization.removeprefix("Bearer ").strip())
    expires = claims.get("exp") if claims else None
    # `not <`: a NaN `exp` compares false both ways; a bool is an int to isinstance, but no time.
    if isinstance(expires, bool) or not isinstance(expires, int | float) or not expires < datetime.now(UTC).timestamp():
        return ""
    try:
        expired_at = datetime.fromtimestamp(expires, UTC).isoformat()
    except (OverflowError, ValueError, OSError):
        # Before year 1, or beyond the platform's time_t (`-1e20`, `-Infinity`): a 401 was a crash here.
        return " (the token's exp claim is long past, before any date)"
    return f" (the token expired at {expired_at})"


def _unverified_claims(token: str) -> dict[str, object] | None:
    try:
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (IndexError, ValueError, binascii.Error, RecursionError):  # RecursionError: a payload nested deep
        return None
    return claims if isinstance(claims, dict) else None
