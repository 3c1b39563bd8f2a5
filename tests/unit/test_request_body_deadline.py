"""`ConcurrencyLimit` in a real uvicorn on loopback: an admitted request's body has a deadline.

A client sending its body slowly, or not at all, used to hold its slot for as long as it liked. Now it is
answered 408 (connection closed) once its body is late and the slot serves the next request; a client gone
before its body was read is a 499, not the framework's 500. Short deadlines here; the served limits are
`REQUEST_BODY_TIMEOUT_S` and `REQUEST_BODY_MIN_RATE_BYTES_PER_S`.
"""

from __future__ import annotations

import asyncio
import json
import socket
from typing import TYPE_CHECKING, Any

import pytest
import uvicorn
from litestar import Litestar, Request, post
from litestar.exceptions import HTTPException

from app.api.errors import http_error_handler
from app.api.overload import ConcurrencyLimit
from app.api.request_head import HeadLimitedHttpToolsProtocol

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

    from litestar.types import ASGIApp, Message, Receive, Scope, Send

BODY_TIMEOUT_S = 0.3
handled: list[bytes] = []
sent_statuses: list[int] = []


@post("/echo", status_code=200)
async def echo(request: Request[Any, Any, Any]) -> dict[str, int]:
    body = await request.body()
    handled.append(body)
    return {"bytes": len(body)}


@post("/after-a-wait", status_code=200)
async def after_a_wait(request: Request[Any, Any, Any]) -> dict[str, int]:
    # As an ingest waits for room among the bodies in flight before it reads its own.
    await asyncio.sleep(3 * BODY_TIMEOUT_S)
    body = await request.body()
    handled.append(body)
    return {"bytes": len(body)}


def recording(app: ASGIApp) -> ASGIApp:
    """The statuses the application answers, also those a gone client never receives."""

    async def recorded(scope: Scope, receive: Receive, send: Send) -> None:
        async def send_and_record(message: Message) -> None:
            if message["type"] == "http.response.start":
                sent_statuses.append(message["status"])
            await send(message)

        await app(scope, receive, send_and_record)

    return recorded


def limited_app(*, min_rate: float) -> Litestar:
    app = Litestar(
        route_handlers=[echo, after_a_wait],
        exception_handlers={HTTPException: http_error_handler},
        logging_config=None,  # Litestar's default config hooks the root logger
    )
    app.asgi_handler = ConcurrencyLimit(
        recording(app.asgi_handler),
        limit=1,
        max_body_bytes=1024 * 1024,
        body_timeout_s=BODY_TIMEOUT_S,
        body_min_rate_bytes_per_s=min_rate,
    )
    return app


async def serve(app: Litestar) -> AsyncIterator[int]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    config = uvicorn.Config(
        app, host="127.0.0.1", port=free, log_level="critical", lifespan="off", http=HeadLimitedHttpToolsProtocol
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    handled.clear()
    sent_statuses.clear()
    yield free
    server.should_exit = True
    await task


@pytest.fixture
async def port() -> AsyncIterator[int]:
    """A limit of one request in flight; a body adds almost nothing to its deadline (1 MB/s)."""
    async for served in serve(limited_app(min_rate=1_000_000)):
        yield served


@pytest.fixture
async def lenient_port() -> AsyncIterator[int]:
    """A limit of one request in flight; each 100 bytes received add a second to the body's deadline."""
    async for served in serve(limited_app(min_rate=100)):
        yield served


def post_head(length: int) -> bytes:
    return f"POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {length}\r\n\r\n".encode()


async def whole_post(port: int, body: bytes) -> int:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(post_head(len(body)) + body)
        status_line = await asyncio.wait_for(reader.readline(), timeout=10.0)
    finally:
        writer.close()
    return int(status_line.split()[1])


async def wait_until(condition: Callable[[], bool]) -> None:
    for _ in range(1_000):
        if condition():
            return
        await asyncio.sleep(0.01)


async def test_a_body_that_stops_arriving_is_answered_408_and_frees_the_slot(port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(post_head(100) + b"x" * 10)  # 90 bytes short, and nothing more comes
        answer = await asyncio.wait_for(reader.read(), timeout=10.0)  # read to the end: the server closes
    finally:
        writer.close()
    after = await whole_post(port, b"y" * 100)

    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408 ")
    assert b"connection: close" in head
    assert json.loads(body)["status"] == 408
    assert after == 200
    assert handled == [b"y" * 100]  # the late request reached no handler
    assert sent_statuses == [408, 200]


async def test_a_body_trickling_a_byte_at_a_time_is_cut_off_with_408(port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    sent = 0
    try:
        writer.write(post_head(1_000))
        answered = asyncio.create_task(reader.readline())
        while not answered.done() and sent < 1_000:
            writer.write(b"z")
            sent += 1
            await asyncio.sleep(0.02)
        status_line = await asyncio.wait_for(answered, timeout=10.0)
    finally:
        writer.close()

    assert int(status_line.split()[1]) == 408
    assert sent < 1_000  # answered long before the body could be whole
    assert handled == []


async def test_a_body_arriving_faster_than_the_minimum_rate_is_served_past_the_first_timeout(
    lenient_port: int,
) -> None:
    chunks = 15  # 40 bytes each 0.1 s (400 bytes/s, four times the minimum): 1.5 s, five times BODY_TIMEOUT_S
    reader, writer = await asyncio.open_connection("127.0.0.1", lenient_port)
    try:
        writer.write(post_head(40 * chunks))
        for _ in range(chunks):
            await asyncio.sleep(0.1)
            writer.write(b"w" * 40)
        status_line = await asyncio.wait_for(reader.readline(), timeout=10.0)
    finally:
        writer.close()

    assert int(status_line.split()[1]) == 200
    assert handled == [b"w" * 40 * chunks]


async def test_a_client_gone_before_its_body_is_read_is_a_499_and_frees_the_slot(port: int) -> None:
    _, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(post_head(100) + b"x" * 10)
    await writer.drain()
    writer.close()
    await wait_until(lambda: bool(sent_statuses))
    after = await whole_post(port, b"y" * 100)

    assert sent_statuses == [499, 200]  # never the framework's 500 for a client that went away
    assert after == 200
    assert handled == [b"y" * 100]


async def test_the_deadline_starts_when_the_handler_first_asks_for_the_body(port: int) -> None:
    # An ingest waiting for room (INGEST_BODY_BYTES_IN_FLIGHT) longer than the body timeout, its body long
    # arrived, was answered 408 when it came to read it: the deadline ran from admission.
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(post_head(100).replace(b"/echo", b"/after-a-wait") + b"v" * 100)
        status_line = await asyncio.wait_for(reader.readline(), timeout=10.0)
    finally:
        writer.close()

    assert int(status_line.split()[1]) == 200
    assert handled == [b"v" * 100]
