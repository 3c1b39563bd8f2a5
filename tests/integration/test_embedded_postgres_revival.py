"""The embedded PostgreSQL killed under a running service starts again by itself, and stops with the service.

Killed (the OOM killer, a stray `kill -9`), it used to stay down: `/readyz` said degraded for ever and every
write was a 503 until the service was restarted.
"""

from __future__ import annotations

import os
import signal
import time
from typing import TYPE_CHECKING

import httpx
import pytest

from tests.integration.conftest import postmaster_pid

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from tests.integration.conftest import ServiceProcess

pytestmark = [pytest.mark.slow, pytest.mark.integration]

REVIVAL_TIMEOUT_S = 60.0


def ingest(url: str, document_id: str) -> int:
    body = {"id": document_id, "text": f"# Note {document_id}\n\nThe harbour crane {document_id} was repaired."}
    return httpx.post(f"{url}/v1/projects/revival/documents", json=body, timeout=10.0).status_code


def test_a_killed_embedded_postgres_runs_again_and_stops_with_the_service(
    poimen_service: Callable[..., ServiceProcess], poimen_data_dir: Path
) -> None:
    service = poimen_service()
    assert ingest(service.url, "before") == 201
    killed = postmaster_pid(poimen_data_dir)
    assert killed is not None

    os.kill(killed, signal.SIGKILL)
    statuses: list[int] = []
    deadline = time.monotonic() + REVIVAL_TIMEOUT_S
    while time.monotonic() < deadline:
        statuses.append(ingest(service.url, f"after-{len(statuses)}"))
        if statuses[-1] == 201:
            break
        time.sleep(0.5)
    revived = postmaster_pid(poimen_data_dir)
    ready = httpx.get(f"{service.url}/readyz", timeout=10.0).json()["status"]
    stopped = service.stop()

    assert statuses[-1] == 201, f"writes never recovered: {statuses}\n{service.log_tail()}"
    assert set(statuses[:-1]) <= {503}  # refused while it was down, never a 500
    assert revived is not None
    assert revived != killed
    assert ready == "ready"
    assert stopped == 0
    assert postmaster_pid(poimen_data_dir) is None  # the server that runs now stopped with the service
    assert "embedded postgres had stopped: running again" in service.log_tail(200)
