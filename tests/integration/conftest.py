"""End-to-end fixtures: the real `poimen` CLI in subprocesses on a temporary POIMEN_DATA_DIR.

`poimen_service` starts `poimen serve` on a free loopback port and waits for `/readyz`; every process
it started is stopped at teardown, and so is an embedded PostgreSQL a killed service left running.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest
from sqlalchemy import make_url, text
from sqlalchemy.ext.asyncio import create_async_engine

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

READY_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 30.0


def poimen_executable() -> str:
    """The `poimen` console script of the interpreter running the tests (the checkout's venv)."""
    script = Path(sys.executable).parent / "poimen"
    if not script.exists():
        pytest.fail(f"no console script at {script}: install the project (pip install -e .)")
    return str(script)


def cli_environment(data_dir: Path, **overrides: str) -> dict[str, str]:
    """The environment of a CLI run: embedded engines under `data_dir`, offline, no external URLs."""
    environment = {
        key: value
        for key, value in os.environ.items()
        if key not in {"DATABASE_URL", "OPENSEARCH_URL", "POIMEN_FLAGS_FILE", "AUTH_MODE"}
    }
    environment.update(
        {
            "POIMEN_DATA_DIR": str(data_dir),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "PYTHONUNBUFFERED": "1",
            "OUTBOX_POLL_INTERVAL_S": "0.1",
        }
    )
    environment.update(overrides)
    return environment


def run_cli(
    *arguments: str, data_dir: Path, timeout_s: float = 180.0, **overrides: str
) -> subprocess.CompletedProcess[str]:
    """Run `poimen ARGUMENTS...` to completion from the repository root and capture its output."""
    return subprocess.run(
        [poimen_executable(), *arguments],
        cwd=data_dir.parent,  # not the checkout: its .env must not leak into the run
        env=cli_environment(data_dir, **overrides),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class ServiceProcess:
    """One `poimen serve` subprocess."""

    process: subprocess.Popen[bytes]
    url: str
    log_path: Path

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return ""

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(f"poimen serve exited with {self.process.returncode}:\n{self.log_tail()}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/readyz", timeout=2.0).status_code == 200:
                    return
            time.sleep(0.2)
        pytest.fail(f"poimen serve not ready within {timeout_s} s:\n{self.log_tail()}")

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs, as when the kernel's OOM killer or a node failure strikes."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(STOP_TIMEOUT_S)

    def stop(self) -> int:
        """SIGTERM and wait for a graceful exit (SIGKILL after STOP_TIMEOUT_S); the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.process.returncode


def postmaster_pid(data_dir: Path) -> int | None:
    """The pid of the embedded PostgreSQL of `data_dir` while it runs, else None."""
    pid_file = data_dir / "postgres" / "postmaster.pid"
    try:
        pid = int(pid_file.read_text().splitlines()[0])
    except (FileNotFoundError, IndexError, ValueError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        return pid
    return pid


def stop_leftover_postgres(data_dir: Path) -> None:
    """Fast-shutdown (SIGINT) the embedded PostgreSQL of `data_dir` if a killed service left it running."""
    pid = postmaster_pid(data_dir)
    if pid is None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGINT)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while postmaster_pid(data_dir) == pid and time.monotonic() < deadline:
        time.sleep(0.1)


@contextlib.contextmanager
def fresh_data_dir() -> Iterator[Path]:
    """A fresh POIMEN_DATA_DIR outside pytest's temp root; its PostgreSQL stopped and folder removed on exit.

    As root the embedded PostgreSQL runs as the `pgserver` user, which must traverse every folder
    above its data; pytest narrows its own temp root to 0700 whenever any pytest session starts,
    which breaks a running `initdb` or `pg_ctl` of a concurrent session.
    """
    path = Path(tempfile.mkdtemp(prefix="poimen-it-"))
    try:
        yield path / "data"
    finally:
        stop_leftover_postgres(path / "data")
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def poimen_data_dir() -> Iterator[Path]:
    """A fresh POIMEN_DATA_DIR outside pytest's temp root (see `fresh_data_dir`)."""
    with fresh_data_dir() as path:
        yield path


def spawn_service(
    data_dir: Path, *, log_path: Path, descriptor_limit: int | None = None, **overrides: str
) -> ServiceProcess:
    """Start `poimen serve` on a free loopback port with its output in `log_path`; not yet waited for.

    `descriptor_limit`: the process's soft and hard limit on open descriptors (`ulimit -n`), when given.
    """
    port = free_port()
    command = [poimen_executable(), "serve", "--host", "127.0.0.1", "--port", str(port)]
    if descriptor_limit is not None:  # through the shell: no preexec_fn in a process that runs threads
        command = ["sh", "-c", f'ulimit -n {descriptor_limit} && exec "$@"', "sh", *command]
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command,
            cwd=data_dir.parent,  # not the checkout: its .env must not leak into the run
            env=cli_environment(data_dir, **overrides),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    return ServiceProcess(process=process, url=f"http://127.0.0.1:{port}", log_path=log_path)


@pytest.fixture
def poimen_service(tmp_path: Path, poimen_data_dir: Path) -> Iterator[Callable[..., ServiceProcess]]:
    """`start(data_dir=poimen_data_dir, descriptor_limit=None, **env)`: a ready `poimen serve`; all stopped at teardown."""
    started: list[tuple[ServiceProcess, Path]] = []

    def start(
        data_dir: Path = poimen_data_dir, *, wait: bool = True, descriptor_limit: int | None = None, **overrides: str
    ) -> ServiceProcess:
        log_path = tmp_path / f"serve-{len(started)}.log"
        service = spawn_service(data_dir, log_path=log_path, descriptor_limit=descriptor_limit, **overrides)
        started.append((service, data_dir))
        if wait:
            service.wait_ready()
        return service

    yield start
    for service, data_dir in started:
        service.stop()
        stop_leftover_postgres(data_dir)


async def execute_statement(url: str, statement: str) -> None:
    """Run one statement outside a transaction (CREATE DATABASE cannot run in one)."""
    engine = create_async_engine(url, isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as connection:
            await connection.execute(text(statement))
    finally:
        await engine.dispose()


def empty_database(postgres_url: str, name: str) -> str:
    """A new, empty database `name` on the session's PostgreSQL, as a URL: a test's own, whatever others left."""
    asyncio.run(execute_statement(postgres_url, f'CREATE DATABASE "{name}"'))
    return make_url(postgres_url).set(database=name).render_as_string(hide_password=False)
