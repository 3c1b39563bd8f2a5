"""A whole-call deadline (`deadline_s`) across sends, retries and their waits, against real loopback servers.

Asserted by counts and order: how many requests reached the server, which error came back. A deadline
that did not hold shows as more sends (a wait slept through, a retry sent past it) or another error.
"""

from __future__ import annotations

import asyncio
import math
from typing import TYPE_CHECKING

import pytest
from poimen_client.clients import AsyncPoimenClient, PoimenClient
from poimen_client.errors import DeadlineExceededError, TransportError, UnavailableError
from poimen_client.models import Document
from poimen_client.retries import RetryPolicy

from tests.client.scripted_server import LIVE, PROBLEM, silent_server
from tests.integration.conftest import free_port

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.client.scripted_server import ScriptedServer, SilentServer

UNAVAILABLE = {"title": "Engine unavailable", "status": 503, "detail": "pgvector is down", "engine": "pgvector"}
MANY_ATTEMPTS = RetryPolicy(max_attempts=1000, base_delay_s=0.05, max_delay_s=0.05)


@pytest.fixture
def silent() -> Iterator[SilentServer]:
    with silent_server() as server:
        yield server


def test_a_retry_after_past_the_deadline_is_not_waited_for(server: ScriptedServer) -> None:
    # The 503's Retry-After (20 s) is within max_delay_s (30 s): without a deadline the client slept 20 s and sent again.
    server.script = [(503, {**PROBLEM, "Retry-After": "20"}, UNAVAILABLE), LIVE]

    with PoimenClient(server.url, deadline_s=2.0) as client, pytest.raises(DeadlineExceededError) as raised:
        client.liveness()

    assert len(server.arrivals) == 1
    error = raised.value
    assert (error.sends, error.deadline_s) == (1, 2.0)
    assert isinstance(error.last_error, UnavailableError)
    assert error.__cause__ is error.last_error
    assert "the call's deadline of 2 s passed before send 2: the wait of 20 s for it would end past it" in str(error)
    assert "503 Engine unavailable on GET /healthz: pgvector is down" in str(error)


def test_a_deadline_exceeded_error_is_a_transport_error_and_a_timeout_error(server: ScriptedServer) -> None:
    server.script = [(503, {"Retry-After": "20"}, {})]

    with PoimenClient(server.url, deadline_s=1.0) as client:
        with pytest.raises(TransportError):
            client.liveness()
        with pytest.raises(TimeoutError):
            client.liveness()


def test_backoff_retries_stop_at_the_deadline_not_at_max_attempts(server: ScriptedServer) -> None:
    server.script = [(503, {}, UNAVAILABLE)]

    with (
        PoimenClient(server.url, deadline_s=0.5, retry=MANY_ATTEMPTS) as client,
        pytest.raises(DeadlineExceededError) as raised,
    ):
        client.project_stats("p")

    assert 1 < len(server.arrivals) < 1000
    # The last send may be cut by the deadline before the server has read it.
    assert raised.value.sends - len(server.arrivals) in {0, 1}


def test_an_answer_within_the_deadline_is_returned_after_retries(server: ScriptedServer) -> None:
    server.script = [(503, {"Retry-After": "0"}, {}), (503, {"Retry-After": "0"}, {}), LIVE]

    with PoimenClient(server.url, deadline_s=30.0) as client:
        answer = client.liveness()

    assert answer.status == "ok"
    assert len(server.arrivals) == 3


def test_a_send_unanswered_at_the_deadline_is_cut_off_before_timeout_s(silent: SilentServer) -> None:
    # timeout_s (60 s) alone would wait a minute for the read; the deadline gives the send the time it leaves.
    with (
        PoimenClient(silent.url, timeout_s=60.0, deadline_s=0.3) as client,
        pytest.raises(DeadlineExceededError) as raised,
    ):
        client.ingest("p", Document(id="d", text="t"))

    assert (silent.connections, silent.requests) == (1, 1)
    assert raised.value.last_error is None
    message = str(raised.value)
    assert f"POST {silent.url}/v1/projects/p/documents: the call's deadline of 0.3 s passed while send 1" in message
    assert "ReadTimeout" in message
    assert "read it before sending it again" in message


def test_a_read_timeout_within_the_deadline_stays_a_plain_transport_error(silent: SilentServer) -> None:
    with PoimenClient(silent.url, timeout_s=0.2, deadline_s=60.0) as client, pytest.raises(TransportError) as raised:
        client.liveness()

    assert not isinstance(raised.value, DeadlineExceededError)
    assert "failed: ReadTimeout" in str(raised.value)


def test_refused_connections_are_retried_until_the_deadline() -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there

    with (
        PoimenClient(url, deadline_s=0.5, retry=MANY_ATTEMPTS) as client,
        pytest.raises(DeadlineExceededError) as raised,
    ):
        client.liveness()

    assert 1 < raised.value.sends < 1000
    assert isinstance(raised.value.last_error, TransportError)
    assert "ConnectError" in str(raised.value)


def test_with_options_sets_the_deadline_of_its_calls_only(server: ScriptedServer) -> None:
    server.script = [(503, {"Retry-After": "1"}, {}), LIVE, (503, {"Retry-After": "1"}, {}), LIVE]

    with PoimenClient(server.url) as client:
        with pytest.raises(DeadlineExceededError):
            client.with_options(deadline_s=0.5).liveness()
        client.liveness()  # no deadline: the 503's Retry-After is waited for, then the 200
        client.with_options(deadline_s=30.0).liveness()  # 503, wait 1 s, 200

    assert len(server.arrivals) == 4


@pytest.mark.parametrize("deadline_s", [0, -1.0, math.nan, math.inf, "10", True])
def test_a_deadline_that_is_no_positive_number_is_refused(deadline_s: object) -> None:
    with pytest.raises(ValueError, match="deadline_s"):
        PoimenClient("http://127.0.0.1:9", deadline_s=deadline_s)  # type: ignore[arg-type]
    with PoimenClient("http://127.0.0.1:9") as client, pytest.raises(ValueError, match="deadline_s"):
        client.with_options(deadline_s=deadline_s)  # type: ignore[arg-type]


async def test_the_async_client_does_not_wait_for_a_retry_after_past_the_deadline(server: ScriptedServer) -> None:
    server.script = [(503, {**PROBLEM, "Retry-After": "20"}, UNAVAILABLE), LIVE]

    async with AsyncPoimenClient(server.url, deadline_s=2.0) as client:
        with pytest.raises(DeadlineExceededError) as raised:
            await client.liveness()

    assert len(server.arrivals) == 1
    assert isinstance(raised.value.last_error, UnavailableError)


async def test_the_async_client_cancels_a_send_at_the_deadline_and_its_pool_stays_clean(silent: SilentServer) -> None:
    async with AsyncPoimenClient(silent.url, timeout_s=60.0) as client:
        with pytest.raises(DeadlineExceededError, match="passed while send 1 was unanswered"):
            await client.with_options(deadline_s=0.3).search("p", "port")

        assert client._http._transport._pool.connections == []  # the cut-off send's connection is closed
    assert (silent.connections, silent.requests) == (1, 1)


async def test_the_async_client_stops_backoff_retries_at_the_deadline(server: ScriptedServer) -> None:
    server.script = [(503, {}, UNAVAILABLE)]

    async with AsyncPoimenClient(server.url, deadline_s=0.5, retry=MANY_ATTEMPTS) as client:
        with pytest.raises(DeadlineExceededError) as raised:
            await client.project_stats("p")

    assert 1 < len(server.arrivals) < 1000
    # The last send may be cut by the deadline before the server has read it.
    assert raised.value.sends - len(server.arrivals) in {0, 1}


async def test_the_async_deadline_is_per_call_not_per_client(server: ScriptedServer) -> None:
    # Each call starts its own clock: three calls one after another each get the whole deadline.
    server.script = [LIVE]

    async with AsyncPoimenClient(server.url, deadline_s=5.0) as client:
        answers = [await client.liveness() for _ in range(3)]
        await asyncio.gather(client.liveness(), client.liveness())

    assert [answer.status for answer in answers] == ["ok"] * 3
    assert len(server.arrivals) == 5
