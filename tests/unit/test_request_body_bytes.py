"""`ConcurrencyLimit`: large request bodies wait for a share of the bytes in flight before they are read.

Searches had no such bound: 16 search bodies of 50 MB at once took a server from 870 to 1,700 MiB RSS.
An ASGI application that holds every request until released counts how many are inside at once.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from app.api.overload import CHARGED_BODY_BYTES, ConcurrencyLimit, charge_caller

if TYPE_CHECKING:
    from litestar.types import Message, Receive, Scope, Send

MAX_BODY_BYTES = 8 * CHARGED_BODY_BYTES


class HoldingApp:
    """Counts the requests that started reading their body; each stays until `release` is set.

    A request's guard names its caller (`charge_caller`, here from an `x-caller` header) before the body is read.
    """

    def __init__(self) -> None:
        self.inside = 0
        self.most_inside = 0
        self.callers_inside: list[str] = []
        self.release = asyncio.Event()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller = dict(scope["headers"]).get(b"x-caller")
        if caller is not None:
            charge_caller(scope, caller.decode())
        await receive()  # the share of the bytes in flight is taken at the body's first read
        if caller is not None:
            self.callers_inside.append(caller.decode())
        self.inside += 1
        self.most_inside = max(self.most_inside, self.inside)
        await self.release.wait()
        self.inside -= 1
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def request_scope(headers: list[tuple[bytes, bytes]]) -> Scope:
    return {"type": "http", "path": "/v1/search", "method": "POST", "headers": headers}  # type: ignore[return-value]


async def no_body() -> Message:
    return {"type": "http.request", "body": b"", "more_body": False}


async def ignore(_message: Message) -> None:
    return None


async def inside_at_once(headers: list[tuple[bytes, bytes]], *, requests: int, bytes_in_flight: int) -> int:
    inner = HoldingApp()
    limit = ConcurrencyLimit(inner, limit=100, max_body_bytes=MAX_BODY_BYTES, body_bytes_in_flight=bytes_in_flight)  # type: ignore[arg-type]
    sending = [asyncio.create_task(limit(request_scope(headers), no_body, ignore)) for _ in range(requests)]
    for _ in range(10):  # let every request reach the application or its wait
        await asyncio.sleep(0)
    counted = inner.most_inside
    inner.release.set()
    await asyncio.gather(*sending)
    return counted


async def test_large_bodies_wait_for_their_share_of_the_bytes_in_flight() -> None:
    declared = [(b"content-length", str(2 * CHARGED_BODY_BYTES).encode())]

    inside = await inside_at_once(declared, requests=4, bytes_in_flight=5 * CHARGED_BODY_BYTES)

    assert inside == 2  # two shares of 2 MiB fit in 5 MiB; the other two wait unread


async def test_a_chunked_body_is_charged_as_the_largest_body() -> None:
    chunked = [(b"transfer-encoding", b"chunked")]

    inside = await inside_at_once(chunked, requests=3, bytes_in_flight=MAX_BODY_BYTES)

    assert inside == 1


async def test_small_bodies_and_bodies_refused_unread_take_no_share() -> None:
    small = [(b"content-length", str(CHARGED_BODY_BYTES - 1).encode())]
    too_large = [(b"content-length", str(MAX_BODY_BYTES + 1).encode())]

    inside_small = await inside_at_once(small, requests=4, bytes_in_flight=CHARGED_BODY_BYTES)
    inside_too_large = await inside_at_once(too_large, requests=4, bytes_in_flight=CHARGED_BODY_BYTES)

    assert (inside_small, inside_too_large) == (4, 4)


async def test_one_callers_large_bodies_leave_room_for_another_callers() -> None:
    # Two of the largest bodies of one caller, sent slowly, held all the bytes in flight: everyone's large
    # bodies waited for as long as they took (a 64 MiB body sent at 16 KiB/s keeps its deadline for an hour).
    inner = HoldingApp()
    limit = ConcurrencyLimit(inner, limit=100, max_body_bytes=MAX_BODY_BYTES, body_bytes_in_flight=2 * MAX_BODY_BYTES)  # type: ignore[arg-type]
    largest = (b"content-length", str(MAX_BODY_BYTES).encode())
    callers = ["a", "a", "b"]
    sending = [
        asyncio.create_task(limit(request_scope([largest, (b"x-caller", caller.encode())]), no_body, ignore))
        for caller in callers
    ]
    for _ in range(10):
        await asyncio.sleep(0)
    inside = list(inner.callers_inside)
    inner.release.set()
    await asyncio.gather(*sending)

    assert inside == ["a", "b"]  # a's second waits on a's own share, holding nothing of the process's
    assert inner.callers_inside == ["a", "b", "a"]
