"""Timeouts and per-call options, against real loopback servers: one that never answers, one that answers a script."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from poimen_client.clients import AsyncPoimenClient, PoimenClient
from poimen_client.errors import TransportError, UnavailableError
from poimen_client.models import Document
from poimen_client.retries import RetryPolicy

from tests.client.scripted_server import LIVE, silent_server
from tests.integration.conftest import free_port

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.client.scripted_server import ScriptedServer, SilentServer


@pytest.fixture
def silent() -> Iterator[SilentServer]:
    with silent_server() as server:
        yield server


class RecordingTransport(httpx.HTTPTransport):
    """The real transport, noting the timeouts each request was sent with."""

    def __init__(self) -> None:
        super().__init__()
        self.timeouts: list[dict[str, Any]] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.timeouts.append(request.extensions["timeout"])
        return super().handle_request(request)


class AsyncRecordingTransport(httpx.AsyncHTTPTransport):
    """The real asyncio transport, counting the sends it was handed."""

    def __init__(self) -> None:
        super().__init__()
        self.sends = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.sends += 1
        return await super().handle_async_request(request)


def test_an_ingest_the_service_never_answers_is_a_read_timeout_sent_once(silent: SilentServer) -> None:
    # A read timeout is not retried, a write's no more than a read's: its outcome is unknown.
    with PoimenClient(silent.url, timeout_s=0.2) as client, pytest.raises(TransportError) as raised:
        client.ingest("p", Document(id="d", text="t"))

    assert f"POST {silent.url}/v1/projects/p/documents failed: ReadTimeout" in str(raised.value)
    assert (silent.connections, silent.requests) == (1, 1)


async def test_a_cancelled_call_closes_its_connection_and_the_next_call_works(silent: SilentServer) -> None:
    async with AsyncPoimenClient(silent.url, timeout_s=60.0) as client:
        task = asyncio.create_task(client.liveness())
        while silent.requests == 0:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

        pool = client._http._transport._pool  # the pool is what a leaked connection would stay in
        assert pool.connections == []
        with pytest.raises(TransportError, match="ReadTimeout"):
            await client.with_options(timeout_s=0.2).liveness()
    assert silent.connections == 2


def test_with_options_sets_the_timeout_of_its_calls_only(server: ScriptedServer) -> None:
    server.script = [LIVE]
    transport = RecordingTransport()

    with PoimenClient(server.url, timeout_s=5.0, transport=transport) as client:
        client.with_options(timeout_s=120.0).liveness()
        client.liveness()

    assert [timeout["read"] for timeout in transport.timeouts] == [120.0, 5.0]
    assert transport.timeouts[0] == {"connect": 120.0, "read": 120.0, "write": 120.0, "pool": 120.0}


def test_with_options_sets_the_retry_policy_of_its_calls_only(server: ScriptedServer) -> None:
    server.script = [(503, {"Retry-After": "0"}, {}), (503, {"Retry-After": "0"}, {}), LIVE]

    with PoimenClient(server.url) as client:
        with pytest.raises(UnavailableError):
            client.with_options(retry=RetryPolicy(max_attempts=1)).liveness()
        answer = client.liveness()  # sent twice: a 503, then the 200

    assert answer.status == "ok"
    assert len(server.arrivals) == 3


def test_closing_a_view_leaves_the_shared_pool_open_closing_the_client_closes_it(server: ScriptedServer) -> None:
    server.script = [LIVE]
    client = PoimenClient(server.url)
    view = client.with_options(timeout_s=1.0)

    view.close()
    client.liveness()
    client.close()

    with pytest.raises(RuntimeError, match="closed"):
        view.liveness()


@pytest.mark.parametrize("timeout_s", [0, -1.0, float("nan"), float("inf")])
def test_a_timeout_that_is_no_positive_number_is_refused(timeout_s: float) -> None:
    with pytest.raises(ValueError, match="timeout_s"):
        PoimenClient("http://127.0.0.1:9", timeout_s=timeout_s)
    with PoimenClient("http://127.0.0.1:9") as client, pytest.raises(ValueError, match="timeout_s"):
        client.with_options(timeout_s=timeout_s)


@pytest.mark.parametrize(("max_attempts", "sends"), [(4, 4), (1, 1)])
def test_a_refused_connection_is_retried_up_to_max_attempts(max_attempts: int, sends: int) -> None:
    # Nothing reached the service, so any call, a write as well, is safe to send again; a restarting
    # pod refuses connections as an ingress answers 502 for it, which was retried while this was raised at once.
    transport = RecordingTransport()
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    retry = RetryPolicy(max_attempts=max_attempts, base_delay_s=0.0)

    with PoimenClient(url, retry=retry, transport=transport) as client, pytest.raises(TransportError) as raised:
        client.ingest("p", Document(id="d", text="t"))

    assert len(transport.timeouts) == sends
    assert f"POST {url}/v1/projects/p/documents failed: ConnectError" in str(raised.value)


async def test_the_async_client_retries_a_refused_connection() -> None:
    transport = AsyncRecordingTransport()
    url = f"http://127.0.0.1:{free_port()}"
    retry = RetryPolicy(max_attempts=3, base_delay_s=0.0)

    async with AsyncPoimenClient(url, retry=retry, transport=transport) as client:
        with pytest.raises(TransportError, match="ConnectError"):
            await client.liveness()

    assert transport.sends == 3


def test_an_async_client_used_in_a_second_event_loop_says_so(server: ScriptedServer) -> None:
    # A module-level client reused by a second asyncio.run failed with httpx's "Event loop is closed", or hung
    # while the first loop lived on in another thread.
    server.script = [LIVE]
    client = AsyncPoimenClient(server.url)

    asyncio.run(client.liveness())
    with pytest.raises(RuntimeError, match="another event loop"):
        asyncio.run(client.liveness())

    assert len(server.arrivals) == 1


async def test_a_call_past_the_pool_size_waits_then_says_the_pool_was_busy(silent: SilentServer) -> None:
    # httpx's PoolTimeout has no message: the error read "failed: PoolTimeout: " and nothing more.
    transport = httpx.AsyncHTTPTransport(limits=httpx.Limits(max_connections=1))
    async with AsyncPoimenClient(silent.url, timeout_s=60.0, transport=transport) as client:
        holding = asyncio.create_task(client.liveness())
        while silent.requests == 0:
            await asyncio.sleep(0.01)

        with pytest.raises(TransportError) as raised:
            await client.with_options(timeout_s=0.2).liveness()
        holding.cancel()

    assert f"GET {silent.url}/healthz failed: PoolTimeout: no connection of the client's pool" in str(raised.value)
    assert silent.connections == 1


def test_a_transport_error_does_not_quote_a_password_of_the_base_url() -> None:
    url = f"http://agent:hunter2@127.0.0.1:{free_port()}"  # nothing listens there

    with (
        PoimenClient(url, retry=RetryPolicy(max_attempts=1)) as client,
        pytest.raises(TransportError) as raised,
    ):
        client.liveness()

    assert "hunter2" not in str(raised.value)
    assert "GET http://127.0.0.1:" in str(raised.value)


def test_a_tls_handshake_that_fails_is_raised_at_once(server: ScriptedServer) -> None:
    # httpx calls it a ConnectError too, but a certificate or protocol failure does not pass with time.
    transport = RecordingTransport()
    url = server.url.replace("http://", "https://")  # a plain HTTP server: the handshake fails
    retry = RetryPolicy(max_attempts=4, base_delay_s=0.0)

    with PoimenClient(url, retry=retry, transport=transport) as client, pytest.raises(TransportError) as raised:
        client.liveness()

    assert len(transport.timeouts) == 1
    assert "ConnectError" in str(raised.value)
