"""Overload on a real server: past MAX_CONCURRENT_REQUESTS requests are shed with 503 + Retry-After at once.

One `poimen serve` on the embedded default with a limit of one request in flight; sixteen clients
search at the same time. Every answer is a 200 or a 503 (never another 5xx), every 503 says when to
retry, the probes keep answering, and the shed requests are counted.
Clients that close mid-body leave no slot taken, write nothing, and count as 499, not as server errors.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import TYPE_CHECKING

import httpx
import jwt
import pytest

from app.api.document_routes import MAX_INGEST_BODY_BYTES

if TYPE_CHECKING:
    from collections.abc import Callable

    from tests.integration.conftest import ServiceProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CLIENTS = 16
ROUNDS = 5
CUT_CLIENTS = 3
JWT_SECRET = "overload-test-secret-0123456789abcdef"


def shed_count(metrics: str) -> float:
    for line in metrics.splitlines():
        if line.startswith('poimen_requests_shed_total{reason="overload"}'):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


async def test_past_the_limit_requests_are_shed_with_503_and_retry_after_and_probes_answer(
    poimen_service: Callable[..., ServiceProcess],
) -> None:
    service = poimen_service(MAX_CONCURRENT_REQUESTS="1", QUERY_CACHE_TTL_SECS="0")
    async with httpx.AsyncClient(base_url=service.url, timeout=30.0) as client:
        await client.post(
            "/v1/projects/busy/documents",
            json={"id": "note", "title": "Backups", "text": "The nightly backup runs at 02:00 on the billing cluster."},
        )
        answers: list[httpx.Response] = []
        for _ in range(ROUNDS):
            answers += await asyncio.gather(
                *(
                    client.get("/memory/query", params={"query": f"backup {n}", "project": "busy"})
                    for n in range(CLIENTS)
                )
            )
        probe = await client.get("/readyz")
        metrics = (await client.get("/metrics")).text

    statuses = {answer.status_code for answer in answers}
    refused = [answer for answer in answers if answer.status_code == 503]
    assert statuses <= {200, 503}  # no other 5xx
    assert 200 in statuses
    assert refused  # sixteen at once against a limit of one
    assert all(answer.headers["retry-after"] == "1" for answer in refused)
    assert all(answer.headers["content-type"].startswith("application/problem+json") for answer in refused)
    assert probe.status_code == 200
    assert "server" not in probe.headers  # the served process names no server and version
    assert shed_count(metrics) == len(refused)


def http_requests(metrics: str, *, method: str, path: str, status: int) -> float:
    prefix = f'poimen_http_requests_total{{app_name="poimen",method="{method}",path="{path}",status_code="{status}"}}'
    return next((float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines() if line.startswith(prefix)), 0.0)


async def test_clients_gone_mid_body_free_their_slot_write_nothing_and_count_as_499_not_500(
    poimen_service: Callable[..., ServiceProcess],
) -> None:
    service = poimen_service(MAX_CONCURRENT_REQUESTS="1")
    port = int(service.url.rsplit(":", 1)[1])
    body = json.dumps({"id": "cut", "text": "# Cut\n\n" + "the nightly backup runs at two " * 400}).encode()
    head = (
        "POST /v1/projects/gone/documents HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    path = "/v1/projects/{project}/documents"
    async with httpx.AsyncClient(base_url=service.url, timeout=60.0) as client:
        for cut in range(1, CUT_CLIENTS + 1):
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(head + body[: len(body) // 2])
            await writer.drain()
            await asyncio.sleep(0.2)  # admitted, its handler waiting for the rest of the body
            writer.close()
            for _ in range(200):  # until the server has answered it (to nobody): /metrics is never shed
                metrics = (await client.get("/metrics")).text
                if http_requests(metrics, method="POST", path=path, status=499) == cut:
                    break
                await asyncio.sleep(0.05)
        after = await client.post("/v1/projects/gone/documents", json={"id": "whole", "text": "Backups run at two."})
        listed = (await client.get("/v1/projects/gone/documents")).json()["items"]
        metrics = (await client.get("/metrics")).text

    assert after.status_code == 201  # one slot, and the cut clients left it free
    assert [item["id"] for item in listed] == ["whole"]
    assert http_requests(metrics, method="POST", path=path, status=499) == CUT_CLIENTS
    assert http_requests(metrics, method="POST", path=path, status=500) == 0
    assert shed_count(metrics) == 0


async def test_one_projects_slow_uploads_leave_room_for_another_projects_write(
    poimen_service: Callable[..., ServiceProcess],
) -> None:
    # Two maximal bodies of one project, arriving slowly (a client may send 16 KiB/s for 17 minutes), took
    # all of INGEST_BODY_BYTES_IN_FLIGHT: every other project's write waited until they were cut off.
    service = poimen_service()
    port = int(service.url.rsplit(":", 1)[1])
    head = (
        "POST /v1/projects/slow/documents HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {MAX_INGEST_BODY_BYTES}\r\n\r\n"
    ).encode()
    uploads = []
    for _ in range(2):
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(head + b'{"id": "slow", "text": "')
        await writer.drain()
        uploads.append(writer)
    try:
        await asyncio.sleep(1.0)  # both admitted, holding their share of the bodies in flight
        async with httpx.AsyncClient(base_url=service.url, timeout=60.0) as client:
            # Well inside REQUEST_BODY_TIMEOUT_S (20 s), when the slow uploads are cut off at the latest.
            other = await asyncio.wait_for(
                client.post("/v1/projects/quick/documents", json={"id": "note", "text": "Backups run at two."}),
                timeout=10.0,
            )
    finally:
        for writer in uploads:
            writer.close()

    assert other.status_code == 201


def bearer(projects: list[str]) -> str:
    now = int(time.time())
    claims = {"sub": f"caller-of-{projects[0]}", "iat": now, "exp": now + 600, "projects": projects, "scope": "search"}
    return jwt.encode(claims, JWT_SECRET, algorithm="HS256")


async def test_one_caller_cannot_hold_every_slot_against_another_callers_search(
    poimen_service: Callable[..., ServiceProcess],
) -> None:
    # Searches whose bodies never come hold their slot until REQUEST_BODY_TIMEOUT_S (20 s): one tenant's token
    # on MAX_CONCURRENT_REQUESTS connections, sending nothing, had every other tenant's request shed with 503.
    service = poimen_service(AUTH_MODE="jwt", JWT_SECRET=JWT_SECRET, MAX_CONCURRENT_REQUESTS="8")
    port = int(service.url.rsplit(":", 1)[1])
    head = (
        f"POST /v1/search HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {bearer(['held'])}\r\n"
        "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"
    ).encode()
    holders = []
    for _ in range(8):
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(head)
        await writer.drain()
        holders.append(writer)
    try:
        await asyncio.sleep(1.0)  # each admitted and past its guard, waiting for its body
        async with httpx.AsyncClient(base_url=service.url, timeout=10.0) as client:
            other = await client.get(
                "/memory/query",
                params={"query": "backups", "project": "other"},
                headers={"Authorization": f"Bearer {bearer(['other'])}"},
            )
    finally:
        for writer in holders:
            writer.close()

    assert other.status_code == 200
