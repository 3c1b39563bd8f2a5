"""The embedded PostgreSQL killed under a running service starts again by itself, and stops with the service.

Killed (the OOM killer, a stray `kill -9`), it used to stay down: `/readyz` said degraded for ever and every
write was a 503 until the service was restarted.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
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
ATTACH_AND_WAIT = (
    "import sys, time; from pathlib import Path; from app.engines.embedded_postgres import EmbeddedPostgres;"
    " EmbeddedPostgres(Path(sys.argv[1])).start(); print('attached', flush=True); time.sleep(600)"
)


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


def test_a_cli_command_killed_beside_the_service_does_not_keep_the_database_running_after_it(
    poimen_service: Callable[..., ServiceProcess], poimen_data_dir: Path
) -> None:
    service = poimen_service()
    assert ingest(service.url, "kept") == 201
    # A second process on the same folder (what a CLI command does), killed before it releases its handle.
    attached = subprocess.Popen(
        [
            sys.executable,
            "-c",
            ATTACH_AND_WAIT,
            str(poimen_data_dir / "postgres"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert attached.stdout is not None
    assert attached.stdout.readline().strip() == "attached"
    attached.kill()
    attached.wait(10)
    attached.stdout.close()

    stopped = service.stop()

    assert stopped == 0
    assert postmaster_pid(poimen_data_dir) is None  # its handle, left by the killed process, did not hold it
