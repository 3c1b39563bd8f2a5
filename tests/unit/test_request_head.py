"""`HeadLimitedHttpToolsProtocol` in a real uvicorn on loopback: a head over the cap is a 431 (a URL over it a 414), a late one a 408."""

from __future__ import annotations

import asyncio
import json
import socket
from typing import TYPE_CHECKING, Any

import pytest
import uvicorn

from app.api.errors import framework_title
from app.api.request_head import MAX_REQUEST_HEAD_BYTES, HeadLimitedHttpToolsProtocol

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

served_paths: list[str] = []
QUICK_HEAD_TIMEOUT_S = 0.3


class QuickHeadProtocol(HeadLimitedHttpToolsProtocol):
    """The served protocol with a short head timeout (it is `REQUEST_HEAD_TIMEOUT_S` in service)."""

    head_timeout_s = QUICK_HEAD_TIMEOUT_S
    unread_body_timeout_s = QUICK_HEAD_TIMEOUT_S
    unread_body_min_rate_bytes_per_s = 1_000_000


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    assert scope["type"] == "http"
    if scope["path"] == "/early":  # answered before its body is read, as a 405, a 401 or a shed 503 are
        served_paths.append(scope["path"])
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"0")]})
        await send({"type": "http.response.body", "body": b""})
        return
    received = 0
    while True:
        message = await receive()
        received += len(message.get("body", b""))
        if not message.get("more_body"):
            break
    if scope["path"] == "/slow":
        await asyncio.sleep(QUICK_HEAD_TIMEOUT_S * 2)  # answering takes longer than a head may
    served_paths.append(scope["path"])
    body = json.dumps({"body_bytes": received}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def serve(protocol: type[HeadLimitedHttpToolsProtocol]) -> AsyncIterator[int]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    config = uvicorn.Config(app, host="127.0.0.1", port=free, log_level="critical", lifespan="off", http=protocol)
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    served_paths.clear()
    yield free
    server.should_exit = True
    await task


@pytest.fixture
async def port() -> AsyncIterator[int]:
    async for served in serve(HeadLimitedHttpToolsProtocol):
        yield served


@pytest.fixture
async def quick_port() -> AsyncIterator[int]:
    async for served in serve(QuickHeadProtocol):
        yield served


def head(path: str, padding_bytes: int, *, extra: str = "") -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: {'x' * padding_bytes}\r\n{extra}\r\n".encode()


async def exchange(port: int, *writes: bytes) -> bytes:
    """Send each write in turn (as far as the server reads), then everything the server answers until it closes."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        for data in writes:
            writer.write(data)
            try:
                await writer.drain()
            except ConnectionError:
                break  # the server answered and closed while this was still being sent
        return await asyncio.wait_for(reader.read(), timeout=10.0)
    finally:
        writer.close()


async def read_answer_head_and_body(reader: asyncio.StreamReader) -> bytes:
    """One answer of a kept-alive connection: its head returned, its body (by `content-length`) read past."""
    answer_head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=10.0)
    length = next(int(line.split(b":")[1]) for line in answer_head.split(b"\r\n") if line.startswith(b"content-length"))
    await reader.readexactly(length)
    return answer_head


def statuses(answer: bytes) -> list[int]:
    return [int(line.split()[1]) for line in answer.split(b"\r\n") if line.startswith(b"HTTP/1.1 ")]


async def test_a_head_just_under_the_cap_is_served(port: int) -> None:
    answer = await exchange(port, head("/under", MAX_REQUEST_HEAD_BYTES - 200, extra="Connection: close\r\n"))

    assert statuses(answer) == [200]
    assert served_paths == ["/under"]


async def test_a_head_over_the_cap_in_one_write_is_a_431_problem_and_reaches_no_handler(port: int) -> None:
    answer = await exchange(port, head("/over", MAX_REQUEST_HEAD_BYTES + 10))

    assert statuses(answer) == [431]
    head_part, _, body = answer.partition(b"\r\n\r\n")
    assert b"content-type: application/problem+json" in head_part
    assert b"connection: close" in head_part
    assert json.loads(body)["status"] == 431
    assert served_paths == []


async def test_a_431_and_a_408_are_titled_as_the_services_other_problems(port: int, quick_port: int) -> None:
    # They read "Request Header Fields Too Large" and "Request Timeout", while the 408 of a late body (the
    # framework's, titled by `framework_title`) read "Request timeout": one status, two titles.
    too_large = await exchange(port, head("/over", MAX_REQUEST_HEAD_BYTES + 10))
    too_late = await exchange(quick_port, b"GET /partial HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")

    titles = [json.loads(answer.partition(b"\r\n\r\n")[2])["title"] for answer in (too_large, too_late)]

    assert titles == ["Request header fields too large", "Request timeout"]
    assert titles == [framework_title(431), framework_title(408)]


async def test_a_header_that_never_ends_is_refused_once_the_cap_is_received(port: int) -> None:
    # No CRLF ever: without the byte count the parser buffers it all before any callback sees it.
    writes = [b"GET /endless HTTP/1.1\r\nX-Padding: "] + [b"x" * 16_384] * 64
    answer = await exchange(port, *writes)

    assert statuses(answer) == [431]
    assert served_paths == []


async def test_a_url_over_the_cap_in_one_write_is_a_414_problem_and_reaches_no_handler(port: int) -> None:
    # The URL is what is too long: a 431 ("headers too large") sent the client looking through its headers.
    answer = await exchange(port, head("/long?q=" + "x" * (MAX_REQUEST_HEAD_BYTES + 10), 10))

    assert statuses(answer) == [414]
    body = json.loads(answer.partition(b"\r\n\r\n")[2])
    assert body["status"] == 414
    assert body["title"] == framework_title(414)
    assert "URL" in body["detail"]
    assert served_paths == []


async def test_a_url_that_never_ends_is_a_414_once_the_cap_is_received(port: int) -> None:
    writes = [b"GET /endless?q="] + [b"x" * 16_384] * 64
    answer = await exchange(port, *writes)

    assert statuses(answer) == [414]
    assert served_paths == []


async def test_a_kept_alive_connections_next_request_with_a_long_url_is_a_414(port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(head("/first", 10))
        first_head = await read_answer_head_and_body(reader)
        for piece in [b"GET /second?q="] + [b"x" * 16_384] * 4:  # the second URL in pieces, none ending a line
            writer.write(piece)
            await writer.drain()
        second = await asyncio.wait_for(reader.read(), timeout=10.0)
    finally:
        writer.close()

    assert statuses(first_head + second) == [200, 414]
    assert served_paths == ["/first"]


async def test_each_request_on_a_kept_alive_connection_has_its_own_cap(port: int) -> None:
    near_half = MAX_REQUEST_HEAD_BYTES // 2 + 1_000  # two of these together are over the cap
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(head("/first", near_half))
        first_head = await read_answer_head_and_body(reader)
        writer.write(head("/second", near_half, extra="Connection: close\r\n"))
        second = await asyncio.wait_for(reader.read(), timeout=10.0)
    finally:
        writer.close()

    assert statuses(first_head + second) == [200, 200]
    assert served_paths == ["/first", "/second"]


async def test_a_body_larger_than_the_cap_is_not_counted_as_head(port: int) -> None:
    body_bytes = MAX_REQUEST_HEAD_BYTES * 4
    request = (
        f"POST /body HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {body_bytes}\r\nConnection: close\r\n\r\n".encode()
        + b"y" * body_bytes
    )
    answer = await exchange(port, request)

    assert statuses(answer) == [200]
    assert json.loads(answer.partition(b"\r\n\r\n")[2]) == {"body_bytes": body_bytes}


async def test_a_connection_that_sends_nothing_is_closed_once_the_head_timeout_passes(quick_port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", quick_port)
    try:
        answer = await asyncio.wait_for(reader.read(), timeout=10.0)  # returns once the server closes
    finally:
        writer.close()

    assert answer == b""  # nothing was asked, so nothing is answered
    assert served_paths == []


async def test_a_head_that_stops_arriving_is_a_408_problem_and_reaches_no_handler(quick_port: int) -> None:
    answer = await exchange(quick_port, b"GET /partial HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")

    assert statuses(answer) == [408]
    head_part, _, body = answer.partition(b"\r\n\r\n")
    assert b"connection: close" in head_part
    assert json.loads(body)["status"] == 408
    assert served_paths == []


async def test_a_head_trickling_a_byte_at_a_time_is_cut_off_with_408(quick_port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", quick_port)
    sent = 0
    try:
        writer.write(b"GET /trickle HTTP/1.1\r\nX-Slow: ")
        answered = asyncio.create_task(reader.read())
        while not answered.done() and sent < 1_000:
            writer.write(b"a")
            sent += 1
            await asyncio.sleep(0.02)
        answer = await asyncio.wait_for(answered, timeout=10.0)
    finally:
        writer.close()

    assert statuses(answer) == [408]
    assert sent < 1_000
    assert served_paths == []


async def test_a_request_answered_slower_than_the_head_timeout_keeps_its_connection(quick_port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", quick_port)
    try:
        writer.write(head("/slow", 10))
        first_head = await read_answer_head_and_body(reader)
        writer.write(head("/next", 10, extra="Connection: close\r\n"))
        second = await asyncio.wait_for(reader.read(), timeout=10.0)
    finally:
        writer.close()

    assert statuses(first_head + second) == [200, 200]
    assert served_paths == ["/slow", "/next"]


def early_head(body_bytes: int) -> bytes:
    return f"POST /early HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {body_bytes}\r\n\r\n".encode()


async def test_an_unread_body_still_trickling_after_its_answer_has_its_connection_closed(quick_port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", quick_port)
    sent = 0
    try:
        writer.write(early_head(1_000) + b"b")
        status_line = await asyncio.wait_for(reader.readline(), timeout=10.0)
        closed = asyncio.create_task(reader.read())  # the rest of the answer, then the end of the connection
        while not closed.done() and sent < 1_000:
            writer.write(b"b")
            sent += 1
            await asyncio.sleep(0.02)
        await asyncio.wait_for(closed, timeout=10.0)
    finally:
        writer.close()

    assert int(status_line.split()[1]) == 200
    assert sent < 1_000  # closed long before the body could be whole
    assert served_paths == ["/early"]


async def test_an_unread_body_sent_in_time_keeps_the_connection_for_the_next_request(quick_port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", quick_port)
    try:
        writer.write(early_head(1_000) + b"b" * 10)
        first = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=10.0)
        writer.write(b"b" * 990 + head("/after", 10, extra="Connection: close\r\n"))
        second = await asyncio.wait_for(reader.read(), timeout=10.0)
    finally:
        writer.close()

    assert statuses(first + second) == [200, 200]
    assert served_paths == ["/early", "/after"]


async def test_a_connection_idle_after_an_unread_body_is_closed_once_the_head_timeout_passes(quick_port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", quick_port)
    try:
        writer.write(early_head(1_000) + b"b" * 10)
        first = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=10.0)
        writer.write(b"b" * 990)  # the body is whole; then nothing more comes
        rest = await asyncio.wait_for(reader.read(), timeout=10.0)
    finally:
        writer.close()

    assert statuses(first) == [200]
    assert rest == b""
