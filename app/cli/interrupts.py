"""Ctrl-C (SIGINT) for the CLI's async commands: a graceful stop that cannot hang for ever.

`asyncio.run` answers the first SIGINT by cancelling the command's task, which then closes its engines.
A cancellation that lands while asyncpg streams an `executemany` (an import or ingest batch) never ends:
its protocol awaits, in a `finally`, a reply PostgreSQL will not send before the rest of the batch (asyncpg
0.32, MagicStack/asyncpg#1265). `poimen import` then sat silent after a Ctrl-C, for ever: 3 of 5 tries
on a 6,000-document export. Here the first SIGINT also starts a deadline; a command still running
`INTERRUPT_GRACE_S` later says so, releases what `atexit` holds (the embedded PostgreSQL, which rolls
back the open transaction) and exits 130. Every batch is its own transaction: what was committed stands.
SIGTERM (`kill`, `timeout`, a closed terminal) stops a command the same way and exits 143: Python's default
ended the process at once, without its `atexit` handlers, and the embedded PostgreSQL it had started ran on.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import signal
import sys
import threading
from typing import TYPE_CHECKING, Any, Final, TypeVar

if TYPE_CHECKING:
    from collections.abc import Coroutine
    from types import FrameType

EXIT_INTERRUPTED: Final = 130
EXIT_TERMINATED: Final = 143
"""128 + SIGTERM, the shells' status for a process SIGTERM ended."""
INTERRUPT_GRACE_S: Final = 10.0
"""How long a command may take to stop after the first Ctrl-C before the process ends without it."""

Result = TypeVar("Result")


class TerminatedError(KeyboardInterrupt):
    """The command was stopped by SIGTERM; handled as a Ctrl-C is, and the exit status is `EXIT_TERMINATED`."""


def run_interruptibly(
    coroutine: Coroutine[Any, Any, Result], *, command: str, grace_s: float = INTERRUPT_GRACE_S
) -> Result:
    """`asyncio.run(coroutine)`; after a SIGINT, the process ends within `grace_s` even if the task does not."""
    deadline = _Deadline(command, grace_s)
    try:
        return asyncio.run(_armed_on_interrupt(coroutine, deadline))
    except KeyboardInterrupt:
        if deadline.signal_number == signal.SIGTERM:
            raise TerminatedError from None
        raise
    finally:
        deadline.disarm()  # stopped in time, the engines closed and the loop too: the status is the command's


class _Deadline:
    """A timer started by the first SIGINT; when it fires, the process ends with `EXIT_INTERRUPTED`."""

    def __init__(self, command: str, grace_s: float) -> None:
        self._command = command
        self._grace_s = grace_s
        self._timer: threading.Timer | None = None
        self.signal_number: int | None = None
        """The first signal that stopped the command: SIGINT or SIGTERM."""

    def arm(self, signal_number: int) -> None:
        if self._timer is None:
            self.signal_number = signal_number
            self._timer = threading.Timer(self._grace_s, self._end_process)
            self._timer.daemon = True
            self._timer.start()

    def disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

    def _end_process(self) -> None:
        terminated = self.signal_number == signal.SIGTERM
        stopped = "terminated (SIGTERM)" if terminated else "interrupted"
        print(
            f"poimen {self._command}: {stopped}; it did not stop within {self._grace_s:g} s (a database write "
            "still in flight), so it ends now: what was committed stands",
            file=sys.stderr,
            flush=True,
        )
        # What the stuck task says once its connection closes under it is not news ("stopped part-way").
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stderr.fileno())
        atexit._run_exitfuncs()  # noqa: SLF001 - the embedded PostgreSQL's handle, as a normal exit releases it
        os._exit(EXIT_TERMINATED if terminated else EXIT_INTERRUPTED)


async def _armed_on_interrupt(coroutine: Coroutine[Any, Any, Result], deadline: _Deadline) -> Result:
    """Await `coroutine` with a SIGINT handler that starts `deadline`, then does what asyncio's does.

    Installed from inside the loop: `asyncio.run` sets its own handler (cancel the task; at a second
    SIGINT, raise `KeyboardInterrupt`) only where it finds Python's default one. SIGTERM, where it has
    Python's default (ending the process at once), gets the same handler.
    """
    if threading.current_thread() is not threading.main_thread():
        return await coroutine
    asyncio_handler = signal.getsignal(signal.SIGINT)
    if not callable(asyncio_handler):  # SIGINT ignored (a background job of a shell): left as it is
        return await coroutine

    def on_interrupt(signal_number: int, frame: FrameType | None) -> None:
        deadline.arm(signal_number)
        asyncio_handler(signal_number, frame)

    signal.signal(signal.SIGINT, on_interrupt)
    terminate_handler = signal.getsignal(signal.SIGTERM)
    if terminate_handler is signal.SIG_DFL:  # one set by the caller, or SIGTERM ignored, is left as it is
        signal.signal(signal.SIGTERM, on_interrupt)
    try:
        return await coroutine
    finally:
        signal.signal(signal.SIGINT, asyncio_handler)
        if terminate_handler is signal.SIG_DFL:
            signal.signal(signal.SIGTERM, terminate_handler)
