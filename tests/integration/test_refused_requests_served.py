"""A request `poimen serve` refuses before the app is counted and, with `ACCESS_LOG_ENABLED`, access-logged.

`poimen serve` picks the served protocol from the settings: before, the line was never written, whatever
`ACCESS_LOG_ENABLED` said (the app's access log middleware never sees such a request).
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from app.api.request_head import MAX_REQUEST_HEAD_BYTES

if TYPE_CHECKING:
    from collections.abc import Callable

    from tests.integration.conftest import ServiceProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow]


async def send_raw(url: str, data: bytes) -> bytes:
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(data)
        await writer.drain()
        return await asyncio.wait_for(reader.read(), timeout=30.0)
    finally:
        writer.close()


def refused_count(metrics_text: str) -> float:
    return sum(
        sample.value
        for family in text_string_to_metric_families(metrics_text)
        for sample in family.samples
        if sample.name == "poimen_http_requests_refused_total" and sample.labels["reason"] == "target_too_long"
    )


async def test_a_url_over_the_head_cap_is_counted_and_access_logged(
    poimen_service: Callable[..., ServiceProcess],
) -> None:
    service = poimen_service(ACCESS_LOG_ENABLED="true", LOG_LEVEL="INFO")
    long_url = f"GET /{'a' * (MAX_REQUEST_HEAD_BYTES + 10)} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()

    answer = await send_raw(service.url, long_url)
    metrics = httpx.get(f"{service.url}/metrics", timeout=10.0).text

    assert answer.startswith(b"HTTP/1.1 414 ")
    assert refused_count(metrics) == 1.0
    entries = [json.loads(line) for line in service.log_path.read_text().splitlines() if line.startswith("{")]
    refused = [entry for entry in entries if entry["logger"] == "poimen.access" and entry["route"] == "<refused>"]
    assert [(entry["method"], entry["status"]) for entry in refused] == [("GET", 414)], service.log_tail()
