"""SIGTERM on `poimen serve`: in-flight requests finish, the process exits 0, the embedded PostgreSQL stops."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

READY_WAIT_S = 120
EXIT_WAIT_S = 30


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def get(url: str, *, timeout_s: float = 10) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:  # noqa: S310 - loopback URL we built
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def postgres_processes(data_dir: Path) -> list[int]:
    """Pids of processes whose command line names a folder under `data_dir` (the embedded server's)."""
    marker = str(data_dir.resolve()).encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if marker in command and b"postgres" in command:
            pids.append(int(entry.name))
    return pids


def wait_ready(process: subprocess.Popen[bytes], url: str, log: Path) -> None:
    deadline = time.monotonic() + READY_WAIT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"server exited early ({process.returncode}): {log.read_text()[-2000:]}")
        try:
            if get(url + "/readyz", timeout_s=2)[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.5)
    pytest.fail(f"server not ready within {READY_WAIT_S} s: {log.read_text()[-2000:]}")


def test_sigterm_drains_requests_stops_the_worker_and_the_embedded_postgres(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    log = tmp_path / "server.log"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    environment = {**os.environ, "POIMEN_DATA_DIR": str(data_dir), "HF_HUB_OFFLINE": "1", "LOG_JSON": "true"}
    poimen = Path(sys.executable).with_name("poimen")
    with log.open("wb") as log_file:
        process = subprocess.Popen(
            [str(poimen), "serve", "--host", "127.0.0.1", "--port", str(port)],
            env=environment,
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_ready(process, url, log)
            postgres_while_running = postgres_processes(data_dir)
            answers: list[int] = []
            in_flight = threading.Thread(
                target=lambda: answers.append(get(url + "/memory/query?query=anything%20at%20all&project=demo")[0])
            )
            in_flight.start()
            time.sleep(0.05)
            process.send_signal(signal.SIGTERM)
            # The timeout only turns a process that never exits into a failure (TimeoutExpired); nothing is timed.
            return_code = process.wait(timeout=EXIT_WAIT_S)
            in_flight.join(timeout=10)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()

    assert postgres_while_running, "no embedded postgres process found while serving"
    assert return_code == 0, log.read_text()[-2000:]
    assert answers in ([200], []), answers  # answered if it got in before the listener closed
    deadline = time.monotonic() + 5
    while postgres_processes(data_dir) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert postgres_processes(data_dir) == []
    records = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    assert any(record["message"].startswith("poimen ready") for record in records)
    assert all("trace_id" in record for record in records)
