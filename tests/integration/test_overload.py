"""Overload on a real server: past MAX_CONCURRENT_REQUESTS requests are shed with 503 + Retry-After at once.

One `poimen serve` on the embedded default with a limit of one request in flight; sixteen clients
search at the same time. Every answer is a 200 or a 503 (never another 5xx), every 503 says when to
retry, the probes keep answering, and the shed requests are counted.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import httpx
import pytest

if TYPE_CHECKING:
    from collections.abc import Callable

    from tests.integration.conftest import ServiceProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CLIENTS = 16
ROUNDS = 5


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
