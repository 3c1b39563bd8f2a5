"""One embedded data folder, several processes: one `poimen serve` at a time, commands beside it.

A second `poimen serve` on the same POIMEN_DATA_DIR started and served: both attached to the one embedded
PostgreSQL, each with its own lexical readers and outbox worker, the other's writes reaching a project's
writer only through the outbox seconds later. It is now refused at start (exit 2) naming the first's pid;
a server killed with SIGKILL (its embedded postmaster still running) blocks no restart, since the kernel
drops its lock. CLI commands run beside a server on its folder: its worker indexes what they queue.
"""

from __future__ import annotations

import re
import subprocess
import time
from typing import TYPE_CHECKING

import httpx
import pytest

from tests.integration.conftest import READY_TIMEOUT_S, postmaster_pid, run_cli, spawn_service

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from tests.integration.conftest import ServiceProcess

pytestmark = [pytest.mark.slow, pytest.mark.integration]

NOTES_PROJECT = "beside"
WORD = "kestrelwing"
INDEX_TIMEOUT_S = 60.0


def test_a_second_serve_is_refused_naming_the_first_and_a_killed_one_blocks_no_restart(
    poimen_service: Callable[..., ServiceProcess], poimen_data_dir: Path, tmp_path: Path
) -> None:
    first = poimen_service()
    second = spawn_service(poimen_data_dir, log_path=tmp_path / "second.log")
    try:
        second_status = second.process.wait(READY_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        second.stop()
        pytest.fail(f"a second poimen serve on the same POIMEN_DATA_DIR was not refused:\n{second.log_tail()}")
    refusal = second.log_path.read_text(errors="replace")
    first_still_ready = httpx.get(f"{first.url}/readyz", timeout=30).status_code

    first.kill()  # SIGKILL: no shutdown code runs; its postmaster outlives it
    orphan_postmaster = postmaster_pid(poimen_data_dir)
    third = poimen_service()
    third_ready = httpx.get(f"{third.url}/readyz", timeout=30).status_code

    assert second_status == 2, refusal
    assert re.search(rf"in use by poimen serve \(pid {first.process.pid}\)", refusal), refusal
    assert "Application startup" not in refusal  # refused before the engines and the model
    assert first_still_ready == 200
    assert orphan_postmaster is not None
    assert third_ready == 200


def test_cli_commands_run_beside_a_serve_whose_worker_indexes_what_they_wrote(
    poimen_service: Callable[..., ServiceProcess], poimen_data_dir: Path, tmp_path: Path
) -> None:
    service = poimen_service(QUERY_CACHE_MAX_SIZE="0")
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / f"{WORD}.md").write_text(f"# {WORD}\n\nThe {WORD} runbook restarts the worker.\n", encoding="utf-8")

    ingested = run_cli("ingest", str(notes), "--project", NOTES_PROJECT, data_dir=poimen_data_dir)
    deadline = time.monotonic() + INDEX_TIMEOUT_S
    hits: list[str] = []
    while time.monotonic() < deadline:
        body = {"query": WORD, "project": NOTES_PROJECT, "strategy": "lexical"}
        answer = httpx.post(f"{service.url}/v1/search", json=body, timeout=30).json()
        hits = [hit["document_id"] for hit in answer["results"]]
        if hits:
            break
        time.sleep(0.2)
    exported = run_cli("export", "--project", NOTES_PROJECT, data_dir=poimen_data_dir)

    assert ingested.returncode == 0, ingested.stderr
    assert hits == [f"{WORD}.md"]
    assert exported.returncode == 0, exported.stderr
    assert len(exported.stdout.splitlines()) == 3  # header, the document, the end line
