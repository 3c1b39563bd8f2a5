"""`scripts/lean_http.py`, the load generators' GET client, against a real HTTP server on loopback (uvicorn)."""

from __future__ import annotations

import asyncio
import importlib
import json
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import uvicorn

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
sys.path.insert(0, str(SCRIPTS))  # the scripts import each other by module name, as `python scripts/x.py` does
lean_http = importlib.import_module("lean_http")


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """`/json?x=..`: a JSON echo with a length; `/chunked`: a streamed body; `/close`: asks to close; `/shed`: 503."""
    if scope["type"] != "http":
        return
    path, query = scope["path"], scope["query_string"].decode()
    headers = [(b"content-type", b"application/json")]
    if path == "/chunked":  # no length given: uvicorn sends it chunked
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        for part in (b'{"parts"', b": [1, 2]}"):
            await send({"type": "http.response.body", "body": part, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        return
    status = 503 if path == "/shed" else 200
    body = json.dumps({"path": path, "query": query, "client": scope["client"][1]}).encode()
    headers.append((b"content-length", str(len(body)).encode()))
    if path == "/close":
        headers.append((b"connection", b"close"))
    if path == "/shed":
        headers.append((b"retry-after", b"1"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


@pytest.fixture
async def base_url() -> AsyncIterator[str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error", lifespan="off"))
    task = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    await task


async def test_a_get_sends_the_params_and_reads_the_status_headers_and_json_body(base_url: str) -> None:
    async with lean_http.LeanHttpClient(base_url, connections=2) as client:
        response = await client.get("/json", params={"query": "vitamin d & bones", "limit": 10})
        shed = await client.get("/shed")

    assert response.status_code == 200
    assert response.json()["query"] == "query=vitamin+d+%26+bones&limit=10"
    assert response.headers["content-type"] == "application/json"
    assert shed.status_code == 503
    assert shed.headers["retry-after"] == "1"


async def test_keep_alive_reuses_one_connection_and_close_opens_a_new_one(base_url: str) -> None:
    async with lean_http.LeanHttpClient(base_url, connections=1) as client:
        ports = [(await client.get("/json")).json()["client"] for _ in range(3)]
        closing = (await client.get("/close")).json()["client"]
        after = (await client.get("/json")).json()["client"]

    assert ports == [ports[0]] * 3
    assert closing == ports[0]
    assert after != ports[0]  # the server closed the last one, so the client connected again


async def test_a_chunked_body_is_read_whole(base_url: str) -> None:
    async with lean_http.LeanHttpClient(base_url, connections=1) as client:
        response = await client.get("/chunked")
        again = await client.get("/json")

    assert response.json() == {"parts": [1, 2]}
    assert again.status_code == 200  # the connection was left at the start of the next response


async def test_concurrent_gets_use_at_most_the_connections_given(base_url: str) -> None:
    async with lean_http.LeanHttpClient(base_url, connections=3) as client:
        responses = await asyncio.gather(*(client.get("/json", params={"i": i}) for i in range(12)))

    assert [r.json()["query"] for r in responses] == [f"i={i}" for i in range(12)]
    assert len({r.json()["client"] for r in responses}) <= 3


async def test_a_refused_connection_is_a_transport_error() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again: nothing listens there
    async with lean_http.LeanHttpClient(f"http://127.0.0.1:{port}", connections=1) as client:
        with pytest.raises(lean_http.TRANSPORT_ERRORS):
            await client.get("/json")


def test_only_plain_http_is_spoken() -> None:
    with pytest.raises(ValueError, match="plain http"):
        lean_http.LeanHttpClient("https://example.test", connections=1)


async def test_a_kept_connection_the_server_closed_while_idle_is_replaced(base_url: str) -> None:
    async with lean_http.LeanHttpClient(base_url, connections=1) as client:
        first = (await client.get("/json")).json()["client"]
        (_, writer) = client._idle[0]  # the pooled connection, closed under the client's feet
        writer.transport.abort()
        second = await client.get("/json")

    assert second.status_code == 200
    assert second.json()["client"] != first
