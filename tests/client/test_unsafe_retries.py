"""A request that reached the service is never sent again unless its answer says so (429, 502, 503, 504).

A connection dropped after the request was sent (closed, or reset) may come after the service did the work:
the client raises a `TransportError` after one send, a write as a read. Only a refused connection, which no
service saw, is sent again (tests/client/test_timeouts.py).
"""

from __future__ import annotations

import pytest
from poimen_client.clients import AsyncPoimenClient, PoimenClient
from poimen_client.errors import TransportError
from poimen_client.models import Document
from poimen_client.retries import RetryPolicy

from tests.client.scripted_server import hang_up_server

RETRY_AT_ONCE = RetryPolicy(max_attempts=4, base_delay_s=0.0)


@pytest.mark.parametrize("reset", [False, True], ids=["closed", "reset"])
def test_a_write_whose_connection_drops_after_sending_is_sent_once(reset: bool) -> None:
    with (
        hang_up_server(reset=reset) as server,
        PoimenClient(server.url, retry=RETRY_AT_ONCE) as client,
        pytest.raises(TransportError) as raised,
    ):
        client.ingest("p", Document(id="d", text="t"))

    assert server.requests == 1
    assert f"POST {server.url}/v1/projects/p/documents failed:" in str(raised.value)


@pytest.mark.parametrize(
    ("name", "arguments"),
    [("delete_document", ("p", "d")), ("reindex", ("p",)), ("delete_project", ("p",)), ("search", ("p", "port"))],
)
def test_no_call_whose_connection_drops_after_sending_is_sent_again(name: str, arguments: tuple[str, ...]) -> None:
    with (
        hang_up_server(reset=True) as server,
        PoimenClient(server.url, retry=RETRY_AT_ONCE) as client,
        pytest.raises(TransportError),
    ):
        getattr(client, name)(*arguments)

    assert server.requests == 1


@pytest.mark.parametrize("reset", [False, True], ids=["closed", "reset"])
async def test_the_async_client_sends_a_dropped_write_once(reset: bool) -> None:
    with hang_up_server(reset=reset) as server:
        async with AsyncPoimenClient(server.url, retry=RETRY_AT_ONCE) as client:
            with pytest.raises(TransportError):
                await client.ingest("p", [Document(id="a", text="t"), Document(id="b", text="u")])

    assert server.requests == 1
