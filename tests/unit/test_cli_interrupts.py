"""Ctrl-C of a CLI command whose task does not stop when cancelled, in a real process with a real SIGINT."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[2]

COMMAND = textwrap.dedent(
    """
    import asyncio, atexit, sys
    from app.cli.interrupts import run_interruptibly

    atexit.register(lambda: print("released", flush=True))

    async def write() -> int:
        loop = asyncio.get_running_loop()
        try:
            print("writing", flush=True)
            await loop.create_future()
        AFTER_CANCEL
        return 0

    sys.exit(run_interruptibly(write(), command="import", grace_s=GRACE_S))
    """
)
# As asyncpg's executemany when a cancellation lands mid-batch: the cancelled await is followed, in a
# `finally`, by one that nothing will ever complete.
STUCK = "finally:\n        await loop.create_future()"
STOPS = "except asyncio.CancelledError:\n        return 3"


def run_then_interrupt(
    after_cancel: str, *, grace_s: float, signal_number: int = signal.SIGINT
) -> subprocess.CompletedProcess[str]:
    script = COMMAND.replace("AFTER_CANCEL", after_cancel).replace("GRACE_S", str(grace_s))
    process = subprocess.Popen(
        [sys.executable, "-c", script],
        cwd=REPOSITORY,
        env={**os.environ, "PYTHONPATH": str(REPOSITORY)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # A shell's background job ignores SIGINT, and a child inherits that: as at a terminal instead.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # noqa: PLW1509 - no threads started yet
    )
    assert process.stdout is not None
    assert process.stdout.readline() == "writing\n"
    process.send_signal(signal_number)
    try:
        stdout, stderr = process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        pytest.fail("the interrupted command never ended")
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def test_a_command_that_does_not_stop_when_interrupted_ends_with_130_and_says_so() -> None:
    # `poimen import` interrupted mid-batch sat silent for ever (asyncio.run waits for the task to stop).
    result = run_then_interrupt(STUCK, grace_s=0.5)

    assert result.returncode == 130, result.stderr
    assert "poimen import: interrupted; it did not stop within 0.5 s" in result.stderr
    assert "what was committed stands" in result.stderr
    assert result.stdout == "released\n"  # the atexit handlers ran: the database handle was let go
    assert "Traceback" not in result.stderr


def test_a_command_that_stops_when_interrupted_keeps_its_own_outcome() -> None:
    result = run_then_interrupt(STOPS, grace_s=60)

    assert result.returncode == 3, result.stderr  # not the deadline's 130: it stopped in time, its own way
    assert "did not stop" not in result.stderr


def test_sigterm_stops_a_command_as_ctrl_c_does_and_ends_with_143() -> None:
    # `kill`, a closed terminal's session manager, `timeout`: Python's default ended the process at once,
    # without its atexit handlers, so the embedded PostgreSQL it had started kept running with no one using it.
    result = run_then_interrupt(STUCK, grace_s=0.5, signal_number=signal.SIGTERM)

    assert result.returncode == 143, result.stderr
    assert "poimen import: terminated (SIGTERM); it did not stop within 0.5 s" in result.stderr
    assert result.stdout == "released\n"
    assert "Traceback" not in result.stderr


def test_sigterm_lets_a_command_that_stops_keep_its_own_outcome() -> None:
    result = run_then_interrupt(STOPS, grace_s=60, signal_number=signal.SIGTERM)

    assert result.returncode == 3, result.stderr
    assert result.stdout == "released\n"
