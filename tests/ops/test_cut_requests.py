"""A request cut before its answer started counts as the 500 the server sends, in the metrics and the access log alike.

uvicorn cancels the requests still running `timeout_graceful_shutdown` (20 s) after SIGTERM and answers each
that had not started its answer with a 500 (an ingest still embedding, a body still arriving). Litestar's
metrics middleware counted such a request as a 200 taking 0 s, while the access log wrote the 500.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

import pytest

from app.api.access_log import ACCESS_LOGGER
from tests.ops.conftest import sample

if TYPE_CHECKING:
    from litestar.types import Message

WRITE = {"app_name": "poimen", "method": "POST", "path": "/v1/projects/{project}/documents"}
STATUSES = ("200", "201", "500")


def http_scope(path: str) -> dict[str, Any]:
    """A POST whose body is announced (100 bytes) as uvicorn hands it to the app."""
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1"), (b"content-type", b"application/json"), (b"content-length", b"100")],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 80),
        "state": {},
    }


async def test_a_request_cut_before_its_answer_counts_as_a_500_in_metrics_and_access_log(
    ops_app, unique_name, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(logging.getLogger(ACCESS_LOGGER), "propagate", True)
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    before = {status: sample("poimen_http_requests_total", status_code=status, **WRITE) for status in STATUSES}
    waiting_for_body = asyncio.Event()
    sent: list[Message] = []

    async def receive() -> Message:
        waiting_for_body.set()
        await asyncio.Event().wait()  # the body never comes
        raise AssertionError

    async def send(message: Message) -> None:
        sent.append(message)

    async with ops_app.client(access_log_enabled=True) as client:
        served = asyncio.create_task(client.app(http_scope(f"/v1/projects/{unique_name}/documents"), receive, send))
        await asyncio.wait([served, asyncio.ensure_future(waiting_for_body.wait())], return_when="FIRST_COMPLETED")
        assert not served.done(), sent  # still reading the body
        served.cancel()  # what uvicorn does once its graceful-shutdown timeout passed
        with pytest.raises(asyncio.CancelledError):
            await served

    assert sent == []  # no answer started: the server sends its own 500
    lines = [record for record in caplog.records if record.name == ACCESS_LOGGER]
    assert [(line.route, line.status) for line in lines] == [("/v1/projects/{project}/documents", 500)]
    after = {status: sample("poimen_http_requests_total", status_code=status, **WRITE) for status in STATUSES}
    assert {status: after[status] - before[status] for status in STATUSES} == {"200": 0, "201": 0, "500": 1}
