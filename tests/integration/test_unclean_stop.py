"""After an unclean stop (the service and its embedded PostgreSQL killed, a reboot) the next command starts unaided.

A killed postmaster leaves `postmaster.pid` behind. After a reboot or in a new container its pid is soon some
other process's: the wheel took that process for the server, every command failed with "connection refused",
and stopping "the server" on exit sent SIGTERM, then SIGKILL, to that unrelated process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from typing import TYPE_CHECKING

import httpx
import psutil
import pytest

from tests.integration.conftest import postmaster_pid, run_cli

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from tests.integration.conftest import ServiceProcess

pytestmark = [pytest.mark.slow, pytest.mark.integration]

PROJECT = "unclean"
EXIT_TIMEOUT_S = 30.0


def wait_until_no_server_runs_on(postgres_dir: Path) -> None:
    """Until no live (non-zombie) postgres process of `postgres_dir` is left: its backends outlive the postmaster briefly."""
    deadline = time.monotonic() + EXIT_TIMEOUT_S
    while time.monotonic() < deadline:
        alive = []
        for process in psutil.process_iter(attrs=("cmdline", "status")):
            cmdline = process.info["cmdline"] or []
            if process.info["status"] != psutil.STATUS_ZOMBIE and str(postgres_dir) in cmdline:
                alive.append(process.pid)
        if not alive:
            return
        time.sleep(0.1)
    pytest.fail(f"postgres processes of {postgres_dir} still run {EXIT_TIMEOUT_S} s after their postmaster was killed")


def wait_lexically_indexed(service: ServiceProcess, document_id: str) -> None:
    """Until the outbox has indexed the document: `query` indexes nothing, so it must be in the index already."""
    deadline = time.monotonic() + EXIT_TIMEOUT_S
    while time.monotonic() < deadline:
        document = httpx.get(f"{service.url}/v1/projects/{PROJECT}/documents/{document_id}", timeout=10.0).json()
        if document["lexically_indexed"]:
            return
        time.sleep(0.1)
    pytest.fail(f"{document_id} not lexically indexed within {EXIT_TIMEOUT_S} s")


def test_a_stale_postmaster_pid_naming_another_process_neither_stops_a_command_nor_kills_that_process(
    poimen_service: Callable[..., ServiceProcess], poimen_data_dir: Path
) -> None:
    service = poimen_service()
    body = {"id": "crane", "text": "# Crane\n\nThe harbour crane was repaired on Tuesday."}
    assert httpx.post(f"{service.url}/v1/projects/{PROJECT}/documents", json=body, timeout=30.0).status_code == 201
    wait_lexically_indexed(service, "crane")
    killed = postmaster_pid(poimen_data_dir)
    assert killed is not None
    service.kill()
    os.kill(killed, signal.SIGKILL)
    wait_until_no_server_runs_on(poimen_data_dir / "postgres")
    # What a reboot makes of the leftover file: its pid now belongs to a process that is no postgres.
    stand_in = subprocess.Popen(["sleep", "600"])
    pid_file = poimen_data_dir / "postgres" / "postmaster.pid"
    lines = pid_file.read_text().splitlines()
    pid_file.write_text("\n".join([str(stand_in.pid), *lines[1:]]) + "\n")

    try:
        queried = run_cli(
            "query", "harbour crane", "--project", PROJECT, "--strategy", "lexical", "--json", data_dir=poimen_data_dir
        )
        stand_in_alive = stand_in.poll() is None
    finally:
        stand_in.kill()
        stand_in.wait(EXIT_TIMEOUT_S)

    assert queried.returncode == 0, queried.stderr
    assert [hit["document_id"] for hit in json.loads(queried.stdout)["results"]] == ["crane"]
    assert stand_in_alive, "the command killed the process the stale postmaster.pid named"
    assert postmaster_pid(poimen_data_dir) is None  # the server the command started stopped with it
