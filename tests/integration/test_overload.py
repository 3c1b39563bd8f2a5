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
from prometheus_client.parser import text_string_to_metric_families

from app.api.document_routes import MAX_INGEST_BODY_BYTES

if TYPE_CHECKING:
    from collections.abc import Callable

    from tests.integration.conftest import ServiceProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CLIENTS = 16
ROUNDS = 5
CUT_CLIENTS = 3
METRICS_DEADLINE_S = 30.0
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


def sample_sum(metrics: str, name: str, **labels: str) -> float:
    """The sum of the samples `name` whose labels include `labels` (0 when there is none)."""
    return sum(
        sample.value
        for family in text_string_to_metric_families(metrics)
        for sample in family.samples
        if sample.name == name and labels.items() <= sample.labels.items()
    )


def in_progress(metrics: str, *, method: str, path: str) -> float:
    """Requests of the route being served now: admitted past the limiter and routed, not answered yet."""
    return sample_sum(metrics, "poimen_http_requests_in_progress", method=method, path=path)


async def metrics_once(client: httpx.AsyncClient, condition: Callable[[str], bool], *, what: str) -> str:
    """The first `/metrics` page (never shed) on which `condition` holds; fails when none does within 30 s."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + METRICS_DEADLINE_S
    while True:
        metrics = (await client.get("/metrics")).text
        if condition(metrics):
            return metrics
        if loop.time() > deadline:
            pytest.fail(f"not seen on /metrics within {METRICS_DEADLINE_S:g} s: {what}")
        await asyncio.sleep(0.05)


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
            await metrics_once(  # admitted, its handler waiting for the rest of the body
                client,
                lambda metrics: in_progress(metrics, method="POST", path=path) == 1,
                what=f"cut client {cut} in flight",
            )
            writer.close()
            await metrics_once(  # the server answered it (to nobody)
                client,
                lambda metrics, answered=cut: http_requests(metrics, method="POST", path=path, status=499) == answered,
                what=f"cut client {cut} answered 499",
            )
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
    path = "/v1/projects/{project}/documents"
    async with httpx.AsyncClient(base_url=service.url, timeout=60.0) as client:
        for _ in range(2):
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(head + b'{"id": "slow", "text": "')
            await writer.drain()
            uploads.append(writer)
        try:
            # Both admitted and in their handler: one holds its share of the bodies in flight, the other waits.
            await metrics_once(
                client,
                lambda metrics: in_progress(metrics, method="POST", path=path) == len(uploads),
                what="both slow uploads in flight",
            )
            # Well inside REQUEST_BODY_TIMEOUT_S (20 s), when the slow uploads are cut off at the latest.
            other = await asyncio.wait_for(
                client.post("/v1/projects/quick/documents", json={"id": "note", "text": "Backups run at two."}),
                timeout=10.0,
            )
            after = (await client.get("/metrics")).text
        finally:
            for writer in uploads:
                writer.close()

    assert other.status_code == 201
    # Answered while both slow uploads were still held, not once one of them was cut off.
    assert in_progress(after, method="POST", path=path) == len(uploads)


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
    path = "/v1/search"

    def held_or_answered(metrics: str) -> float:
        answered = sample_sum(metrics, "poimen_http_requests_total", method="POST", path=path)
        return in_progress(metrics, method="POST", path=path) + answered

    holders = []
    async with httpx.AsyncClient(base_url=service.url, timeout=10.0) as client:
        for _ in range(8):
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(head)
            await writer.drain()
            holders.append(writer)
        try:
            # Each admitted and routed: answered already (its guard refused it, its caller's share taken) or in
            # flight, holding its slot while it waits for its body.
            await metrics_once(
                client, lambda metrics: held_or_answered(metrics) == len(holders), what="every held search admitted"
            )
            other = await client.get(
                "/memory/query",
                params={"query": "backups", "project": "other"},
                headers={"Authorization": f"Bearer {bearer(['other'])}"},
            )
            after = (await client.get("/metrics")).text
        finally:
            for writer in holders:
                writer.close()

    assert other.status_code == 200
    # Answered while searches of the held caller still held their slots: none of them cut off (408) yet.
    assert in_progress(after, method="POST", path=path) > 0
    assert sample_sum(after, "poimen_http_requests_total", method="POST", path=path, status_code="408") == 0
