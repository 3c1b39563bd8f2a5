"""`PoimenClient` (blocking) and `AsyncPoimenClient` (asyncio) on httpx.

Both inherit every endpoint from `Endpoints`; each only sends an `Exchange` and sleeps between
retries its own way. A token (a JWT when the service runs `AUTH_MODE=jwt`) is sent as
`Authorization: Bearer`; pass a callable to fetch a fresh one for every request.
"""

from __future__ import annotations

import asyncio
import copy
import math
import re
import time
from typing import TYPE_CHECKING, Any, ClassVar, Final, Generic, Self, TypeVar

import httpx

from poimen_client.deadlines import Deadline, checked_deadline_s
from poimen_client.endpoints import Endpoints
from poimen_client.retries import RetryPolicy, failed_in_tls

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Generator, Iterator, Mapping

    from poimen_client.calls import Exchange
    from poimen_client.models import DocumentFilter, DocumentSummary, ProjectSummary

T = TypeVar("T")
HttpT = TypeVar("HttpT", httpx.Client, httpx.AsyncClient)
TransportT = TypeVar("TransportT", httpx.BaseTransport, httpx.AsyncBaseTransport)
DEFAULT_TIMEOUT_S: Final = 30.0
USER_AGENT: Final = "poimen-client/0.1.0"
_BEARER_PREFIX: Final = re.compile(r"^bearer(?:\s+|$)", re.IGNORECASE)


class BearerToken(httpx.Auth):
    """`Authorization: Bearer <token>` on every request; a callable is asked for the token each time."""

    def __init__(self, token: str | Callable[[], str]) -> None:
        self._token = token

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        """Add the header; httpx runs this flow for sync and async clients alike."""
        request.headers["Authorization"] = (
            f"Bearer {sendable_token(self._token() if callable(self._token) else self._token)}"
        )
        yield request


def sendable_token(token: object) -> str:
    """`token` as a header carries it: surrounding space and a pasted `Bearer ` prefix dropped.

    Raises:
        ValueError: no token, or characters a header cannot carry; the message never holds the token
            (httpx's own error quoted the whole header, so a token read from a file with its newline
            ended up in logs).
    """
    if not isinstance(token, str):
        msg = f"the token must be a string, got {type(token).__name__}"
        raise ValueError(msg)  # noqa: TRY004 - a bad value handed to the client, as the other checks
    stripped = _BEARER_PREFIX.sub("", token.strip())
    if not stripped:
        msg = "the token is empty"
        raise ValueError(msg)
    if not all("!" <= character <= "~" for character in stripped):
        msg = "the token holds a character an HTTP header cannot carry (a space, a line break or a non-ASCII one)"
        raise ValueError(msg)
    return stripped


class ClientBase(Endpoints, Generic[HttpT, TransportT]):
    """What both clients hold: the retry policy and an httpx client with base URL, token and headers.

    `token`: a JWT (or a function returning one) for a service with `AUTH_MODE=jwt`. `timeout_s`: httpx's
    limit on each phase of one send (connect, write, each read, pool wait), not a deadline for the whole
    call: retries wait on top of it. `deadline_s`: a limit on each whole call, its retries and their waits
    included (None: none); past it a `DeadlineExceededError`. `retry`: how 429, 502, 503 and 504 answers and
    refused connections are retried (`RetryPolicy(max_attempts=1)` turns retries off). `headers`: sent with
    every request. `transport`: an httpx transport of the client's kind, e.g. for a proxy or a Unix socket.
    `with_options()` changes
    `timeout_s`, `deadline_s` or `retry` for some calls.

    Thread safety: a `PoimenClient` may be shared by threads (httpx's pool locks; a `token` function is then
    called from each of them). An `AsyncPoimenClient` belongs to the event loop of its first call: one per
    `asyncio.run`.
    """

    http_type: ClassVar[type[httpx.Client | httpx.AsyncClient]]

    def __init__(  # noqa: PLR0913 - keyword-only options, each with a default
        self,
        base_url: str,
        *,
        token: str | Callable[[], str] | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        deadline_s: float | None = None,
        retry: RetryPolicy | None = None,
        headers: Mapping[str, str] | None = None,
        transport: TransportT | None = None,
    ) -> None:
        self.retry = retry or RetryPolicy()
        self.timeout_s = checked_timeout_s(timeout_s)
        self.deadline_s = checked_deadline_s(deadline_s)
        self._owns_http = True
        # The asyncio client's event loop, once it has sent; a list so that `with_options` views share it.
        self._event_loop: list[asyncio.AbstractEventLoop] = []
        options: dict[str, Any] = {
            "base_url": base_url.rstrip("/"),
            "auth": BearerToken(token) if token is not None else None,
            "timeout": timeout_s,
            "headers": {"user-agent": USER_AGENT, "accept": "application/json", **(headers or {})},
            "transport": transport,  # of the client's kind: TransportT goes with HttpT
        }
        http: Any = self.http_type(**options)
        self._http: HttpT = http

    def with_options(
        self, *, timeout_s: float | None = None, deadline_s: float | None = None, retry: RetryPolicy | None = None
    ) -> Self:
        """This client with another `timeout_s`, `deadline_s` or `retry` for the calls made through it.

        None keeps the client's. `client.with_options(timeout_s=300).ingest(...)` for one large ingest,
        `client.with_options(deadline_s=2).search(...)` for a search that must answer within 2 s, retries
        included. The view shares the client's connection pool, token and headers: closing the view does
        nothing, closing the client closes both.
        """
        view = copy.copy(self)
        view._owns_http = False  # noqa: SLF001 - a copy of this very class
        if timeout_s is not None:
            view.timeout_s = checked_timeout_s(timeout_s)
        if deadline_s is not None:
            view.deadline_s = checked_deadline_s(deadline_s)
        if retry is not None:
            view.retry = retry
        return view


def checked_timeout_s(timeout_s: object) -> float:
    """`timeout_s` if it is a positive, finite number of seconds; else a `ValueError` (httpx took 0 and -1 as is)."""
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, int | float) or not 0 < timeout_s < math.inf:
        msg = f"timeout_s must be a positive, finite number of seconds, got {timeout_s!r}"
        raise ValueError(msg)
    return float(timeout_s)


class PoimenClient(ClientBase[httpx.Client, httpx.BaseTransport]):
    """Blocking client: `with PoimenClient("http://127.0.0.1:8080") as client: client.search("p", "q")`."""

    http_type = httpx.Client

    def send(self, exchange: Exchange[T]) -> T:
        """Send one endpoint call, retrying as its policy says; the decoded answer or a `PoimenError`.

        With a `deadline_s`, each send's phases wait at most the time left, but a body that keeps arriving
        a little within each of them is read on (as with `timeout_s`): a thread cannot be interrupted.
        """
        exchange.deadline = Deadline.start(self.deadline_s)
        request = exchange.request(self._http, timeout_s=self.timeout_s)
        with exchange.send_errors(request):
            while True:
                exchange.limit_next_send(request, timeout_s=self.timeout_s)
                try:
                    response = self._http.send(request)
                except httpx.ConnectError as error:
                    if failed_in_tls(error) or (delay_s := exchange.connect_retry_delay_s(error)) is None:
                        raise
                else:
                    if (delay_s := exchange.retry_delay_s(response)) is None:
                        break
                time.sleep(delay_s)
        return exchange.result(response)

    def iter_documents(
        self, project: str, *, where: DocumentFilter | None = None, page_size: int = 100
    ) -> Iterator[DocumentSummary]:
        """Every document of `project` that `where` selects, by id: `list_documents` page after page.

        Each page is one call (`page_size` documents; `deadline_s` applies to each). Paging by id never
        repeats a document; one written or deleted while paging is listed or not by where its id falls.
        """
        cursor = None
        while True:
            page = self.list_documents(project, where=where, limit=page_size, cursor=cursor)
            yield from page.items
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def iter_projects(self, *, page_size: int = 100) -> Iterator[ProjectSummary]:
        """Every project the token may read that holds documents, by id: `list_projects` page after page."""
        cursor = None
        while True:
            page = self.list_projects(limit=page_size, cursor=cursor)
            yield from page.items
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def close(self) -> None:
        """Close the connection pool (a view from `with_options` leaves it to its client)."""
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


class AsyncPoimenClient(ClientBase[httpx.AsyncClient, httpx.AsyncBaseTransport]):
    """Asyncio client: `async with AsyncPoimenClient(url) as client: await client.search("p", "q")`."""

    http_type = httpx.AsyncClient

    async def send(self, exchange: Exchange[T]) -> T:
        """Send one endpoint call, retrying as its policy says; the decoded answer or a `PoimenError`.

        With a `deadline_s`, a send still unanswered at the deadline is cancelled (its connection closed).
        """
        self._check_event_loop()
        exchange.deadline = Deadline.start(self.deadline_s)
        request = exchange.request(self._http, timeout_s=self.timeout_s)
        with exchange.send_errors(request):
            while True:
                remaining_s = exchange.limit_next_send(request, timeout_s=self.timeout_s)
                try:
                    async with asyncio.timeout(remaining_s):
                        response = await self._http.send(request)
                except TimeoutError as error:  # asyncio.timeout's own: httpx raises httpx.TimeoutException
                    raise exchange.deadline_passed_in_send(request, error) from error
                except httpx.ConnectError as error:
                    if failed_in_tls(error) or (delay_s := exchange.connect_retry_delay_s(error)) is None:
                        raise
                else:
                    if (delay_s := exchange.retry_delay_s(response)) is None:
                        break
                await asyncio.sleep(delay_s)
        return exchange.result(response)

    def _check_event_loop(self) -> None:
        """A `RuntimeError` when called from another event loop than the first call's, whose connections it holds.

        httpx failed with "Event loop is closed" (a second `asyncio.run`), or hung while the first loop lived on.
        """
        loop = asyncio.get_running_loop()
        if not self._event_loop:
            self._event_loop.append(loop)
        elif self._event_loop[0] is not loop:
            msg = (
                "this AsyncPoimenClient was first used in another event loop, which its connections belong to"
                " (a second asyncio.run?): create one client per event loop"
            )
            raise RuntimeError(msg)

    async def iter_documents(
        self, project: str, *, where: DocumentFilter | None = None, page_size: int = 100
    ) -> AsyncIterator[DocumentSummary]:
        """Every document of `project` that `where` selects, by id (`async for`); as `PoimenClient.iter_documents`."""
        cursor = None
        while True:
            page = await self.list_documents(project, where=where, limit=page_size, cursor=cursor)
            for item in page.items:
                yield item
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    async def iter_projects(self, *, page_size: int = 100) -> AsyncIterator[ProjectSummary]:
        """Every project the token may read that holds documents, by id (`async for`)."""
        cursor = None
        while True:
            page = await self.list_projects(limit=page_size, cursor=cursor)
            for item in page.items:
                yield item
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    async def aclose(self) -> None:
        """Close the connection pool (a view from `with_options` leaves it to its client)."""
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()
