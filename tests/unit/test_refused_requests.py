"""Requests refused before the app (400, 408, 414, 431): counted by status and reason, and access-logged when on.

They are answered by the HTTP protocol itself (`app.api.request_head`), so neither Litestar's metrics middleware
nor the access log middleware ever saw them: an SRE saw no trace of a client whose every request was refused.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

import pytest
from prometheus_client import REGISTRY

from app.api.access_log import ACCESS_LOGGER, REFUSED_ROUTE
from app.api.request_head import MAX_REQUEST_HEAD_BYTES
from app.observability.metrics import MetricsSwitch
from tests.unit.test_request_head import QUICK_HEAD_TIMEOUT_S, QuickHeadProtocol, exchange, head, serve, statuses

if TYPE_CHECKING:
    from collections.abc import AsyncIterator


class AccessLoggedQuickHeadProtocol(QuickHeadProtocol):
    """The quick protocol as `poimen serve` runs it with `ACCESS_LOG_ENABLED=true`."""

    access_log_enabled = True


@pytest.fixture(autouse=True)
def metrics_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(MetricsSwitch, "enabled", True)  # another test's app may have turned them off


@pytest.fixture
async def quick_port() -> AsyncIterator[int]:
    async for served in serve(QuickHeadProtocol):
        yield served


@pytest.fixture
async def logged_port() -> AsyncIterator[int]:
    async for served in serve(AccessLoggedQuickHeadProtocol):
        yield served


def refused(status: int, reason: str) -> float:
    labels = {"status": str(status), "reason": reason}
    return REGISTRY.get_sample_value("poimen_http_requests_refused_total", labels) or 0.0


async def partial_head_then_wait(port: int) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(b"GET /slowloris HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        await writer.drain()
        return await asyncio.wait_for(reader.read(), timeout=10.0)
    finally:
        writer.close()


TOO_LONG_URL = f"GET /{'a' * (MAX_REQUEST_HEAD_BYTES + 10)} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()
MALFORMED = b"NOT A REQUEST\r\n\r\n"
REFUSALS = ((400, "malformed"), (408, "head_timeout"), (414, "target_too_long"), (431, "head_too_large"))


async def test_each_refusal_is_counted_once_under_its_status_and_reason(quick_port: int) -> None:
    before = {refusal: refused(*refusal) for refusal in REFUSALS}

    answers = [
        await exchange(quick_port, MALFORMED),
        await partial_head_then_wait(quick_port),
        await exchange(quick_port, TOO_LONG_URL),
        await exchange(quick_port, head("/over", MAX_REQUEST_HEAD_BYTES + 10)),
    ]

    assert [statuses(answer) for answer in answers] == [[400], [408], [414], [431]]
    assert {key: refused(*key) - value for key, value in before.items()} == dict.fromkeys(before, 1.0)


async def test_a_served_request_and_a_silent_connection_count_no_refusal(quick_port: int) -> None:
    before = sum(refused(status, reason) for status, reason in REFUSALS)

    served = await exchange(quick_port, head("/fine", 10, extra="Connection: close\r\n"))
    _, writer = await asyncio.open_connection("127.0.0.1", quick_port)
    await asyncio.sleep(QUICK_HEAD_TIMEOUT_S * 2)  # closed unanswered: nothing was asked
    writer.close()

    assert statuses(served) == [200]
    assert sum(refused(status, reason) for status, reason in REFUSALS) == before


async def test_with_the_access_log_on_each_refusal_is_one_access_line(
    logged_port: int, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)

    await exchange(logged_port, MALFORMED)
    await partial_head_then_wait(logged_port)
    await exchange(logged_port, TOO_LONG_URL)
    over_cap = await exchange(logged_port, head("/over", MAX_REQUEST_HEAD_BYTES + 10))

    lines = [record for record in caplog.records if record.name == ACCESS_LOGGER]
    assert [(line.method, line.route, line.status) for line in lines] == [  # type: ignore[attr-defined]
        (None, REFUSED_ROUTE, 400),  # no method was read: the request line itself is bad
        ("GET", REFUSED_ROUTE, 408),
        ("GET", REFUSED_ROUTE, 414),
        ("GET", REFUSED_ROUTE, 431),
    ]
    assert lines[-1].response_bytes == len(over_cap.split(b"\r\n\r\n", 1)[1])  # type: ignore[attr-defined]
    assert [(line.project, line.subject) for line in lines] == [(None, None)] * 4  # type: ignore[attr-defined]
    assert all(line.duration_ms >= 0 for line in lines)  # type: ignore[attr-defined]


async def test_with_the_access_log_off_a_refusal_writes_no_access_line(
    quick_port: int, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)

    answer = await exchange(quick_port, TOO_LONG_URL)

    assert statuses(answer) == [414]
    assert [record for record in caplog.records if record.name == ACCESS_LOGGER] == []
