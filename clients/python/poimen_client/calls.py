"""The request/response layer both clients share: each endpoint defined once, sent by either client.

An `Endpoint` is a method, a path template, a response type and a builder function that turns the
caller's arguments into a `Call` (path values, query string, body, headers). Read from a `PoimenClient`
it is a function returning the decoded answer; read from an `AsyncPoimenClient`, one returning an
awaitable of it. An `Exchange` is one call in flight: the request to send, whether and when to send it
again, and the answer's decoding or error. The clients only send and sleep.
"""

from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Generic, ParamSpec, Self, TypeVar, overload
from urllib.parse import quote

import httpx
import msgspec

from poimen_client.errors import (
    DeadlineExceededError,
    PoimenError,
    TransportError,
    UnexpectedAnswerError,
    error_from_response,
)
from poimen_client.retries import retry_after_seconds
from poimen_client.sendable import checked_text, encoded_json

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine, Iterator, Mapping

    from poimen_client.clients import AsyncPoimenClient, PoimenClient
    from poimen_client.deadlines import Deadline
    from poimen_client.retries import RetryPolicy

P = ParamSpec("P")
T = TypeVar("T")
QueryValue = str | int | float | bool
JSON_MEDIA_TYPE: Final = "application/json"
_SILENT_ERRORS: Final[Mapping[type[httpx.TransportError], str]] = {
    httpx.PoolTimeout: (
        "no connection of the client's pool came free within timeout_s (every one busy with another call:"
        " fewer calls at once, or a larger pool through transport=...)"
    ),
}
"""What httpx's errors that carry no message of their own mean."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Call:
    """What one endpoint call sends, apart from the method and path template its `Endpoint` holds.

    `path_values` fill the template (quoted here; a document id keeps its `/`); `query` values that
    are None are left out; `body` is encoded as JSON.
    """

    path_values: Mapping[str, str] = field(default_factory=dict)
    query: Mapping[str, QueryValue | None] = field(default_factory=dict)
    body: object = None
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Endpoint(Generic[P, T]):
    """One operation of the API; a descriptor that both client classes inherit from `Endpoints`."""

    method: str
    path: str
    """The path template as the OpenAPI document spells it, e.g. `/v1/projects/{project}`."""
    response_type: type[T]
    """What a success decodes to: a Struct, `dict[str, Any]`, `str` (text) or `type(None)` (no body)."""
    build: Callable[P, Call]
    also_success: frozenset[int] = frozenset()
    """Statuses besides 2xx that are an answer, not an error, and never retried (`/readyz` answers 503)."""

    def exchange(self, call: Call, *, retry: RetryPolicy) -> Exchange[T]:
        """One call of this endpoint, ready to send."""
        return Exchange(endpoint=self, call=call, retry=retry)

    @overload
    def __get__(self, instance: None, owner: type[Any]) -> Self: ...
    @overload
    def __get__(self, instance: PoimenClient, owner: type[Any]) -> Callable[P, T]: ...
    @overload
    def __get__(self, instance: AsyncPoimenClient, owner: type[Any]) -> Callable[P, Coroutine[Any, Any, T]]: ...
    def __get__(self, instance: PoimenClient | AsyncPoimenClient | None, owner: type[Any]) -> Any:
        if instance is None:
            return self

        @functools.wraps(self.build)
        def send(*args: P.args, **kwargs: P.kwargs) -> Any:  # noqa: ANN401 - T, or an awaitable of T
            return instance.send(self.exchange(self.build(*args, **kwargs), retry=instance.retry))

        return send


def endpoint(
    method: str, path: str, *, response: type[T], also_success: frozenset[int] = frozenset()
) -> Callable[[Callable[P, Call]], Endpoint[P, T]]:
    """Decorate a builder function (its signature and docstring become the client method's) as an endpoint."""

    def define(build: Callable[P, Call]) -> Endpoint[P, T]:
        return Endpoint(method, path, response, build, also_success)

    return define


def _check_addressable(name: str, value: object) -> None:
    """A `ValueError` for a path value with an empty, `.` or `..` part (between slashes, for a document id).

    httpx resolves dot segments before sending, so such a value reaches another route: `delete_document(p,
    "..")` went out as `DELETE /v1/projects/p/`, which deletes the whole project. The service refuses such
    project and document ids, so no project or document has one. (A project id has met the whole of the
    service's rule in its endpoint's builder already; this is the check a document id gets.) A value that
    is not a string is a `TypeError`; one holding a surrogate code point, which UTF-8 cannot encode, a
    `ValueError` too.
    """
    if not isinstance(value, str):  # typed as str, but an untyped caller's None failed in value.split below
        msg = f"{name} must be a str, got {type(value).__name__}"
        raise TypeError(msg)
    if any(part in {"", ".", ".."} for part in value.split("/")):
        msg = f"{name} {value!r} has an empty, '.' or '..' part: no project or document is named so"
        raise ValueError(msg)
    checked_text(name, value)  # quote() would raise the codec's error, naming no field


@dataclass(slots=True, kw_only=True)
class Exchange(Generic[T]):
    """One endpoint call in flight: builds its request, decides retries, decodes its answer."""

    endpoint: Endpoint[Any, T]
    call: Call
    retry: RetryPolicy
    attempt: int = 1
    """1-based number of the send whose answer is being looked at."""
    deadline: Deadline | None = None
    """When the whole call must be answered by (the client's `deadline_s`, started by its `send`); None: never."""
    last_error: PoimenError | None = None
    """The error the last send that is retried ended in (a 503, a refused connection), for a deadline's error."""
    cut_by_deadline: bool = False
    """Whether the current send's phase timeouts are the time left before the deadline, less than `timeout_s`."""

    def request(self, http: httpx.Client | httpx.AsyncClient, *, timeout_s: float) -> httpx.Request:
        """The HTTP request, built by the client's httpx instance (base URL, auth, default headers).

        `timeout_s` is httpx's limit on each phase of each send of it (connect, write, each read, pool wait).
        """
        call = self.call
        for name, value in call.path_values.items():
            _check_addressable(name, value)
        values = {
            name: quote(value, safe="/" if name == "document_id" else "") for name, value in call.path_values.items()
        }
        headers = dict(call.headers)
        content = None
        if call.body is not None:
            content = encoded_json(call.body)
            headers["content-type"] = JSON_MEDIA_TYPE
        query = {name: value for name, value in call.query.items() if value is not None}
        for parameter, text in query.items():
            if isinstance(text, str):
                checked_text(parameter, text)  # httpx would raise the codec's error, naming no field
        return http.build_request(
            self.endpoint.method,
            self.endpoint.path.format_map(values),
            params=query or None,
            content=content,
            headers=headers,
            timeout=timeout_s,
        )

    @contextlib.contextmanager
    def send_errors(self, request: httpx.Request) -> Iterator[None]:
        """Turn httpx's failures to send and receive into this client's errors, naming the request.

        A connection or timeout failure is a `TransportError` (a `DeadlineExceededError` for a timeout that was
        the time left before the call's deadline); an answer whose body its `Content-Encoding` does not decode
        (httpx reads it whole inside `send`) is an `UnexpectedAnswerError`.
        """
        try:
            yield
        except httpx.TimeoutException as error:
            if self.cut_by_deadline:  # the deadline's share of timeout_s ran out, not timeout_s itself
                raise self.deadline_passed_in_send(request, error) from error
            raise _transport_error(request, error) from error
        except httpx.TransportError as error:
            raise _transport_error(request, error) from error
        except httpx.DecodingError as error:
            msg = f"{request.method} {_shown_url(request)} answered a body that does not decode: {error}"
            raise UnexpectedAnswerError(msg) from error

    def limit_next_send(self, request: httpx.Request, *, timeout_s: float) -> float | None:
        """Set `request`'s httpx timeouts for its next send: `timeout_s`, or the time the deadline leaves if less.

        Returns the seconds left before the deadline (None: the call has none), the asyncio client's limit
        on the whole send.

        Raises:
            DeadlineExceededError: the deadline has passed; nothing is sent.
        """
        remaining_s = None if self.deadline is None else self.deadline.remaining_s()
        if remaining_s is not None and remaining_s <= 0:
            what = f"before send {self.attempt} could begin"
            raise self._deadline_error(request, what, sends=self.attempt - 1) from self.last_error
        self.cut_by_deadline = remaining_s is not None and remaining_s < timeout_s
        limit_s = timeout_s if remaining_s is None else min(timeout_s, remaining_s)
        request.extensions["timeout"] = httpx.Timeout(limit_s).as_dict()
        return remaining_s

    def retry_delay_s(self, response: httpx.Response) -> float | None:
        """Seconds to wait before sending again, or None when `response` is final; counts the attempt.

        Raises:
            DeadlineExceededError: the wait would end past the deadline (nothing is waited for).
        """
        if response.status_code in self.endpoint.also_success:
            return None
        delay_s = self.retry.delay_s(response, attempt=self.attempt)
        if delay_s is not None:
            failure = error_from_response(response, retry_after_s=retry_after_seconds(response))
            self._retry_after(response.request, failure, delay_s=delay_s)
        return delay_s

    def connect_retry_delay_s(self, error: httpx.ConnectError) -> float | None:
        """Seconds to wait before sending again after a refused connection, or None to raise it; counts the attempt.

        Raises:
            DeadlineExceededError: the wait would end past the deadline (nothing is waited for).
        """
        delay_s = self.retry.connect_delay_s(attempt=self.attempt)
        if delay_s is not None:
            failure = _transport_error(error.request, error)
            failure.__cause__ = error
            self._retry_after(error.request, failure, delay_s=delay_s)
        return delay_s

    def _retry_after(self, request: httpx.Request, failure: PoimenError, *, delay_s: float) -> None:
        """Note a send that is to be retried after `delay_s`: the error it ended in, the next send's number."""
        self.last_error = failure
        if self.deadline is not None and delay_s >= self.deadline.remaining_s():
            # Waiting until the deadline only to raise then would spend the caller's time for nothing.
            what = f"before send {self.attempt + 1}: the wait of {delay_s:g} s for it would end past it"
            raise self._deadline_error(request, what, sends=self.attempt) from failure
        self.attempt += 1

    def deadline_passed_in_send(self, request: httpx.Request, error: BaseException) -> DeadlineExceededError:
        """The error for a send the deadline cut off (`error`: httpx's timeout, or asyncio's)."""
        what = (
            f"while send {self.attempt} was unanswered ({type(error).__name__}); a write may have been done all"
            " the same: read it before sending it again"
        )
        return self._deadline_error(request, what, sends=self.attempt)

    def _deadline_error(self, request: httpx.Request, what: str, *, sends: int) -> DeadlineExceededError:
        deadline_s = self.deadline.deadline_s if self.deadline is not None else 0.0
        last = f"; the last send ended in: {self.last_error}" if self.last_error is not None else ""
        msg = f"{request.method} {_shown_url(request)}: the call's deadline of {deadline_s:g} s passed {what}{last}"
        return DeadlineExceededError(msg, deadline_s=deadline_s, sends=sends, last_error=self.last_error)

    def result(self, response: httpx.Response) -> T:
        """The decoded answer; a `ServiceError` subclass for an error status."""
        if not (response.is_success or response.status_code in self.endpoint.also_success):
            raise error_from_response(response, retry_after_s=retry_after_seconds(response))
        response_type: Any = self.endpoint.response_type
        if response_type is type(None):
            return None  # type: ignore[return-value]  # T is None for this endpoint
        if response_type is str:
            return response.text  # type: ignore[return-value]  # T is str for this endpoint
        try:
            decoded: T = msgspec.json.decode(response.content, type=response_type)
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as error:  # Recursion: JSON nested deep
            if not response.is_success:
                # A status this endpoint answers with (`/readyz`'s 503) but not its body: a proxy's error
                # page, say. The error the status stands for, not a puzzle about the body.
                raise error_from_response(response, retry_after_s=retry_after_seconds(response)) from error
            msg = f"unexpected answer to {self.endpoint.method} {response.request.url.path}: {error}"
            raise UnexpectedAnswerError(msg) from error
        return decoded


def _shown_url(request: httpx.Request) -> httpx.URL:
    """The request's URL without the base URL's user and password: a credential, never quoted."""
    return request.url.copy_with(userinfo=b"")


def _transport_error(request: httpx.Request, error: httpx.TransportError) -> TransportError:
    """The `TransportError` for httpx's failure to send or receive, naming the request."""
    reason = str(error) or _SILENT_ERRORS.get(type(error), "(no message)")
    return TransportError(f"{request.method} {_shown_url(request)} failed: {type(error).__name__}: {reason}")
