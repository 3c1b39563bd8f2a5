"""An answer its client does not read is dropped after the send timeout; one read slowly is sent in whole."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import pytest

from app.api.request_head import HeadLimitedHttpToolsProtocol
from tests.unit.test_request_head import serve

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

ANSWER_BYTES = 24 * 1024 * 1024  # far over what the kernel's socket buffers take, so the process must buffer it
QUICK_SEND_TIMEOUT_S = 0.5


class QuickSendProtocol(HeadLimitedHttpToolsProtocol):
    """The served protocol with a short send timeout (it is `RESPONSE_SEND_TIMEOUT_S` in service)."""

    send_timeout_s = QUICK_SEND_TIMEOUT_S


@pytest.fixture
async def port(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[int]:
    monkeypatch.setattr("tests.unit.test_request_head.app", large_answer)
    async for served in serve(QuickSendProtocol):
        yield served


async def large_answer(scope: dict[str, Any], receive: Any, send: Any) -> None:
    assert scope["type"] == "http"
    await receive()
    headers = [(b"content-type", b"application/octet-stream"), (b"content-length", str(ANSWER_BYTES).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b"x" * ANSWER_BYTES})


async def ask(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1024 * 1024)
    writer.write(b"GET /big HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n")
    await writer.drain()
    return reader, writer


async def read_all(reader: asyncio.StreamReader, *, pause_s: float) -> int:
    """Bytes read until the connection ends or the whole answer (head included) came, pausing between reads."""
    received = 0
    while received < ANSWER_BYTES:
        try:
            chunk = await reader.read(256 * 1024)
        except ConnectionResetError:
            break
        if not chunk:
            break
        received += len(chunk)
        await asyncio.sleep(pause_s)
    return received


async def test_an_answer_nobody_reads_is_dropped_after_the_send_timeout(port: int) -> None:
    reader, writer = await ask(port)
    await asyncio.sleep(QUICK_SEND_TIMEOUT_S * 4)  # reads nothing for longer than the timeout
    received = await asyncio.wait_for(read_all(reader, pause_s=0), timeout=30)
    writer.close()
    assert received < ANSWER_BYTES  # what the kernel buffers held, then the dropped connection's end


async def test_an_answer_read_slowly_but_steadily_arrives_in_whole(port: int) -> None:
    reader, writer = await ask(port)
    received = await asyncio.wait_for(read_all(reader, pause_s=QUICK_SEND_TIMEOUT_S / 10), timeout=120)
    writer.close()
    assert received >= ANSWER_BYTES  # the body and its head: every pause was shorter than the timeout
