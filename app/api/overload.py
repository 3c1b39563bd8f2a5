"""Overload protection: a bounded number of requests in flight per process, and an optional per-caller rate.

Past `MAX_CONCURRENT_REQUESTS` a request is shed at once with 503 and `Retry-After` instead of queueing
without bound (a queue only turns overload into latency and memory). The limiter wraps the whole
application, routing included (`guard_concurrency`): Litestar's own `middleware` runs per route, after
routing, and under 4x overload what each shed request still cost the serving loop cut the rate it served
(docs/reliability.md, "Overload"). Probes, metrics and the API document are never shed: a busy replica
must still answer its kubelet. The per-caller limit (`app/search/rate_limit.py`) is applied by the
guards, once the caller is known.

An admitted request holds its slot while its body arrives, so the body has a deadline: whole within
`REQUEST_BODY_TIMEOUT_S`, plus one second for each `REQUEST_BODY_MIN_RATE_BYTES_PER_S` bytes received
(Apache's mod_reqtimeout `body=20,MinRate=...`). Past it the request is answered 408 and its connection
closed: before, a client sending its body a byte at a time (or never) held a slot for as long as it liked,
and `MAX_CONCURRENT_REQUESTS` such clients shed everyone else. A client gone before its body was read is
answered 499 ("client closed request", as nginx logs it), not the 500 the framework raised, so it counts
in no server-error rate.

Large bodies also share `REQUEST_BODY_BYTES_IN_FLIGHT`: a request declaring 1 MiB or more (its
`Content-Length`, or the most a body may be when it is chunked) waits, unread and holding its slot, until its
share fits, from its first read on (after its guard), and one caller's at most one largest body's worth.
Ingests had such a bound and searches none: 16 search bodies of 50 MB at once (refused 400, their query too
long) took a server from 870 to 1,700 MiB, and the 256 slots allow 16 GiB of them in a 2 GiB pod.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, cast

from litestar.enums import ScopeType
from litestar.exceptions import HTTPException

from app.api.errors import PROBLEM_MEDIA_TYPE, RETRY_AFTER_S
from app.api.heap_release import HeapTrimmer
from app.domain.errors import RateLimitedError
from app.ingestion.admission import Allowance, KeyedAllowances
from app.observability.metrics import record_shed

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from litestar import Litestar
    from litestar.types import (
        ASGIApp,
        HTTPResponseBodyEvent,
        HTTPResponseStartEvent,
        Receive,
        ReceiveMessage,
        Scope,
        Send,
    )

NEVER_SHED_PREFIXES: Final = ("/healthz", "/readyz", "/metrics", "/schema")
REQUEST_BODY_TIMEOUT_S: Final = 20.0
"""Seconds an admitted request's body may take, before the allowance its received bytes add."""
REQUEST_BODY_MIN_RATE_BYTES_PER_S: Final = 16 * 1024
"""Each this many bytes received extend the body's deadline by a second: a slower body is cut off (408)."""
REQUEST_BODY_BYTES_IN_FLIGHT: Final = 128 * 1024 * 1024
"""Bytes of large request bodies (by `Content-Length`) one process reads at once: two of the largest a route takes."""
CHARGED_BODY_BYTES: Final = 1024 * 1024
"""Bodies from this size on take a share of `REQUEST_BODY_BYTES_IN_FLIGHT`; smaller ones are bounded by the slots."""
CLIENT_CLOSED_REQUEST: Final = 499
CALLER_SHARE_OF_SLOTS: Final = 4
"""A verified caller holds at most `MAX_CONCURRENT_REQUESTS` / 4 slots (at least one); its next request is a 429.

A slot is held while its body arrives, and a body may take `REQUEST_BODY_TIMEOUT_S` to start: one tenant's
token on `MAX_CONCURRENT_REQUESTS` connections that sent only their heads had every other tenant shed with 503.
Callers are the guards' (`app.api.guards.request_caller_key`: the token's subject); without auth there is
one caller, and no share."""
SLOT_SCOPE_KEY: Final = "poimen.slot"
"""Where an admitted request's `_Slot` is in its ASGI scope, for the guard to charge once it knows the caller."""
"""nginx's status for a request whose client went away before it was read; no client ever receives it."""


@dataclass(slots=True)
class _Slot:
    """One admitted request's slot, the caller it was charged to once its guard verified one, and its body's share."""

    limiter: ConcurrencyLimit
    body_bytes: int = 0  # what its body takes of the bytes in flight (`_charged_bytes`)
    caller: str | None = None
    held: contextlib.AsyncExitStack = field(default_factory=contextlib.AsyncExitStack)

    async def admit_body(self) -> None:
        """Wait, before the body is read, until its share fits: the caller's (one largest body), then the process's."""
        if not self.body_bytes:
            return
        if self.caller is not None:
            await self.held.enter_async_context(self.limiter.caller_bodies.take(self.caller, self.body_bytes))
        await self.held.enter_async_context(self.limiter.bodies.take(self.body_bytes))


def charge_caller(scope: Scope, caller: str) -> None:
    """Count the request's slot against `caller`; `RateLimitedError` when the caller holds its share already.

    Nothing for a request the limiter did not admit (a probe, an app without the limiter).
    """
    slot = cast("dict[str, object]", scope).get(SLOT_SCOPE_KEY)
    if isinstance(slot, _Slot) and slot.caller is None:
        slot.limiter.charge(slot, caller)


class ConcurrencyLimit:
    """ASGI middleware: at most `limit` HTTP requests in flight (outside `NEVER_SHED_PREFIXES`); 503 beyond."""

    def __init__(  # noqa: PLR0913 - each bound of an admitted request, defaulted but for the served two
        self,
        app: ASGIApp,
        *,
        limit: int,
        max_body_bytes: int,
        body_timeout_s: float = REQUEST_BODY_TIMEOUT_S,
        body_min_rate_bytes_per_s: float = REQUEST_BODY_MIN_RATE_BYTES_PER_S,
        body_bytes_in_flight: int = REQUEST_BODY_BYTES_IN_FLIGHT,
    ) -> None:
        self._app = app
        self._limit = limit
        self._max_body_bytes = max_body_bytes
        self.bodies = Allowance(body_bytes_in_flight)  # one app per event loop, as `Allowance` needs
        # Taken first, once the guard named the caller: two slow bodies of the largest size held all of `bodies`.
        self.caller_bodies = KeyedAllowances(max_body_bytes)
        self._body_timeout_s, self._body_min_rate = body_timeout_s, body_min_rate_bytes_per_s
        self._in_flight = 0  # one event loop per process: no lock needed between awaits
        self._per_caller = max(1, limit // CALLER_SHARE_OF_SLOTS)
        self._by_caller: Counter[str] = Counter()
        self._heap = HeapTrimmer()
        # The refusal is the same every time: built once, so shedding costs no serialisation.
        detail = f"more than {limit} requests in flight; retry shortly"
        self._refusal = json.dumps({"type": "about:blank", "title": "Overloaded", "status": 503, "detail": detail})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on, or shed it when `limit` requests are already in flight."""
        if scope["type"] != ScopeType.HTTP or scope["path"].startswith(NEVER_SHED_PREFIXES):
            await self._app(scope, receive, send)
            return
        if self._in_flight >= self._limit:
            record_shed("overload")
            await _problem(send, 503, self._refusal.encode())
            return
        self._in_flight += 1
        slot = _Slot(self, body_bytes=_charged_bytes(scope, max_body_bytes=self._max_body_bytes))
        cast("dict[str, object]", scope)[SLOT_SCOPE_KEY] = slot
        body = _BodyWithDeadline(
            receive, timeout_s=self._body_timeout_s, min_rate=self._body_min_rate, admit=slot.admit_body
        )
        try:
            async with slot.held:
                await self._app(scope, body.receive, send)
        finally:
            self._in_flight -= 1
            if slot.caller is not None:
                self._by_caller[slot.caller] -= 1
                if not self._by_caller[slot.caller]:
                    del self._by_caller[slot.caller]
        # Answered: a large body (an ingest, a batch search, a refused one alike) left the heap near its peak.
        await self._heap.release(body.received_bytes)

    def charge(self, slot: _Slot, caller: str) -> None:
        """Count `slot` against `caller`, or raise `RateLimitedError` (429) past the caller's share."""
        if self._by_caller[caller] >= self._per_caller:
            record_shed("caller_in_flight")
            msg = f"more than {self._per_caller} requests in flight from this caller; retry shortly"
            raise RateLimitedError(msg, retry_after_s=RETRY_AFTER_S)
        self._by_caller[caller] += 1
        slot.caller = caller


class _BodyWithDeadline:
    """One admitted request's `receive`: its body must arrive in time, and a client gone before it is a 499."""

    def __init__(
        self, receive: Receive, *, timeout_s: float, min_rate: float, admit: Callable[[], Awaitable[None]]
    ) -> None:
        self._receive, self._admit = receive, admit
        self._loop = asyncio.get_running_loop()
        # From the handler's first read, not from admission: an ingest waits for room among the bodies in flight
        # (`INGEST_BODY_BYTES_IN_FLIGHT`) before it reads its own, and was answered 408 once that wait passed it.
        self._deadline: float | None = None
        self._timeout_s, self._min_rate = timeout_s, min_rate
        self._whole = False
        self.received_bytes = 0

    async def receive(self) -> ReceiveMessage:
        """The next message; raises (408, 499) rather than hand the framework a late or cut-off body."""
        if self._whole:  # the body is read: what comes next (a disconnect) is the framework's to see
            return await self._receive()
        if self._deadline is None:
            await self._admit()  # the body's share of the bytes in flight, unread until it fits
            self._deadline = self._loop.time() + self._timeout_s
        try:
            # `timeout_at`, not `wait_for`: no task made per message on every request's body.
            async with asyncio.timeout_at(self._deadline):
                message = await self._receive()
        except TimeoutError:
            detail = (
                f"the request body did not arrive in time: {self._timeout_s:g} s, plus 1 s for each "
                f"{self._min_rate:g} bytes received"
            )
            raise HTTPException(status_code=408, detail=detail, headers={"connection": "close"}) from None
        if message["type"] == "http.disconnect":
            detail = "the client closed the connection before its request was read"
            raise HTTPException(status_code=CLIENT_CLOSED_REQUEST, detail=detail)
        if message["type"] == "http.request":
            received = len(message.get("body", b""))
            self.received_bytes += received
            self._deadline += received / self._min_rate
            self._whole = not message.get("more_body", False)
        return message


def _charged_bytes(scope: Scope, *, max_body_bytes: int) -> int:
    """What a request's body takes of the bytes in flight: 0 for a small one, or one refused 413 unread."""
    declared = b""
    for name, value in scope["headers"]:
        if name == b"content-length":
            declared = value
        elif name == b"transfer-encoding":
            return max_body_bytes  # chunked: as large as a body may be
    if not declared.isdigit():
        return 0  # no body (a malformed length is refused by the HTTP parser before it gets here)
    size = int(declared)
    return size if CHARGED_BODY_BYTES <= size <= max_body_bytes else 0


def guard_concurrency(app: Litestar, *, limit: int, max_body_bytes: int) -> None:
    """Put the limiter in front of `app`'s whole request handling: before routing, middleware and tracing."""
    # `asgi_handler` is what `Litestar.__call__` hands every HTTP request to, after lifespan events.
    app.asgi_handler = ConcurrencyLimit(app.asgi_handler, limit=limit, max_body_bytes=max_body_bytes)


async def _problem(send: Send, status: int, body: bytes) -> None:
    start: HTTPResponseStartEvent = {
        "type": "http.response.start",
        "status": status,
        "headers": [
            (b"content-type", PROBLEM_MEDIA_TYPE.encode()),
            (b"retry-after", str(RETRY_AFTER_S).encode()),
            (b"content-length", str(len(body)).encode()),
        ],
    }
    await send(start)
    end: HTTPResponseBodyEvent = {"type": "http.response.body", "body": body, "more_body": False}
    await send(end)
