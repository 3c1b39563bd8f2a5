"""`poimen serve` as a child process on a loopback port: the one way the scripts start, await and stop it.

The benchmarks and probes each run the service under their own environment and data folder; what they
share is here: a free port, the process with its output in a log file, the wait for `/readyz`, and a stop
that escalates from SIGTERM to SIGKILL. The wait uses `http.client` so that a script without httpx can use it.
"""

from __future__ import annotations

import http.client
import socket
import subprocess
import time
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from pathlib import Path

STOP_TIMEOUT_S: Final = 30.0
READY_PROBE_TIMEOUT_S: Final = 2.0


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def spawn(
    command: Sequence[str], *, environment: Mapping[str, str], cwd: Path, log_path: Path
) -> subprocess.Popen[bytes]:
    """Start `command` (a `poimen serve ...` line) with stdout and stderr appended to `log_path`."""
    with log_path.open("ab") as log:
        return subprocess.Popen(  # the child keeps its own descriptor of the log
            list(command), cwd=cwd, env=dict(environment), stdout=log, stderr=subprocess.STDOUT
        )


def serve_command(program: Sequence[str], port: int) -> list[str]:
    """`<program> serve` on 127.0.0.1:`port` (`program` the `poimen` entry point, or `python -m app`)."""
    return [*program, "serve", "--host", "127.0.0.1", "--port", str(port)]


def wait_until_ready(
    process: subprocess.Popen[bytes], port: int, *, timeout_s: float, poll_interval_s: float = 0.25
) -> bool:
    """True once `/readyz` on 127.0.0.1:`port` answers 200; False when the process exits first.

    Raises TimeoutError when neither happens within `timeout_s` (the process is left running: the caller
    decides whether to stop it or read its log first).
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=READY_PROBE_TIMEOUT_S)
        try:
            connection.request("GET", "/readyz")
            if connection.getresponse().status == 200:
                return True
        except OSError:
            pass  # not listening yet, or busy starting
        finally:
            connection.close()
        time.sleep(poll_interval_s)
    msg = f"not ready within {timeout_s} s"
    raise TimeoutError(msg)


def stop(process: subprocess.Popen[bytes], *, timeout_s: float = STOP_TIMEOUT_S) -> None:
    """SIGTERM, then SIGKILL when it has not exited within `timeout_s`; nothing when it already exited."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def log_tail(log_path: Path, characters: int = 3000) -> str:
    """The end of a server log, for a message that says why a start failed."""
    return log_path.read_text(errors="replace")[-characters:]


class StartFailedError(RuntimeError):
    """The service exited before it was ready, or was not ready in time (the message ends with its log)."""


def start(
    program: Sequence[str],
    *,
    environment: Mapping[str, str],
    cwd: Path,
    log_path: Path,
    timeout_s: float,
) -> tuple[subprocess.Popen[bytes], str]:
    """`poimen serve` on a free loopback port, once ready: (process, base URL).

    On failure the process is stopped and StartFailedError says how it failed, with the end of its log.
    """
    port = free_port()
    process = spawn(serve_command(program, port), environment=environment, cwd=cwd, log_path=log_path)
    try:
        ready = wait_until_ready(process, port, timeout_s=timeout_s)
    except TimeoutError:
        stop(process)
        msg = f"poimen serve not ready within {timeout_s} s:\n{log_tail(log_path)}"
        raise StartFailedError(msg) from None
    if not ready:
        msg = f"poimen serve exited with {process.returncode}:\n{log_tail(log_path)}"
        raise StartFailedError(msg)
    return process, f"http://127.0.0.1:{port}"
