"""`complete_methods` in a real uvicorn on loopback, over raw sockets: Host rules and HEAD as the server sends it."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest
from litestar import Litestar, get

from app.api.method_semantics import complete_methods
from tests.unit.test_request_body_deadline import serve

if TYPE_CHECKING:
    from collections.abc import AsyncIterator


@get("/thing")
async def thing() -> dict[str, str]:
    return {"thing": "x" * 100}


@pytest.fixture
async def port() -> AsyncIterator[int]:
    app = Litestar([thing], logging_config=None)  # Litestar's default config hooks the root logger
    complete_methods(app)
    async for served in serve(app):
        yield served


async def exchange(port: int, request: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), timeout=5)
    writer.close()
    return answer


@pytest.mark.parametrize(
    "host_lines",
    [b"", b"Host: 127.0.0.1\r\nHost: elsewhere.example\r\n", b"Host: \r\n"],
    ids=["none", "two", "empty"],
)
async def test_an_http11_request_without_exactly_one_host_is_a_400(port: int, host_lines: bytes) -> None:
    answer = await exchange(port, b"GET /thing HTTP/1.1\r\n" + host_lines + b"Connection: close\r\n\r\n")

    assert answer.startswith(b"HTTP/1.1 400 ")
    assert b"application/problem+json" in answer
    assert b"Host" in answer


async def test_an_http10_request_may_leave_host_out(port: int) -> None:
    answer = await exchange(port, b"GET /thing HTTP/1.0\r\n\r\n")

    assert answer.startswith(b"HTTP/1.1 200 ")


async def test_head_sends_gets_headers_and_no_body(port: int) -> None:
    got = await exchange(port, b"GET /thing HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    headed = await exchange(port, b"HEAD /thing HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")

    got_head, _, got_body = got.partition(b"\r\n\r\n")
    head, _, body = headed.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ")
    assert body == b""
    assert f"content-length: {len(got_body)}".encode() in head
    assert got_head.split(b"\r\n")[2:] == head.split(b"\r\n")[2:]  # the same headers past status and date
