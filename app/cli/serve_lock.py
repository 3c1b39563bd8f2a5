"""One `poimen serve` per embedded data folder: an OS lock on a file in `POIMEN_DATA_DIR`.

A second `poimen serve` on the same folder started and worked: both attached to the one embedded
PostgreSQL, each with its own tantivy readers and outbox worker, the writer of each project held by
whichever took it first (the other's writes reached it only through the outbox, seconds later). The
embedded lexical index is for one server process, so the second is refused at start, naming the first's pid
(not with `OPENSEARCH_URL` set: the embedded PostgreSQL is a server several processes share).

The lock is `flock` on `SERVE_LOCK_FILE`: the kernel releases it when the holder exits however it exits
(SIGKILL, the OOM killer, a crash), so a stale file never blocks a restart; the pid written in the file is
only there to be named. The descriptor is not inherited (Python's default), so the embedded postmaster,
which outlives a killed server, does not hold it. CLI commands (`ingest`, `query`, `export`, ...) take no
lock: they work beside a server on its folder (its worker indexes what they queue).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from pathlib import Path

SERVE_LOCK_FILE: Final = "serve.lock"
"""Held (flock, exclusive) by the `poimen serve` of the folder; holds its pid as text."""


class DataDirInUseError(Exception):
    """Another live process serves the data folder; `holder_pid` is None when it could not be read."""

    def __init__(self, data_dir: Path, holder_pid: int | None) -> None:
        self.data_dir = data_dir
        self.holder_pid = holder_pid
        holder = "another poimen serve" if holder_pid is None else f"poimen serve (pid {holder_pid})"
        super().__init__(
            f"POIMEN_DATA_DIR {data_dir} is in use by {holder}: its embedded engines serve one process; stop that"
            " server, or set POIMEN_DATA_DIR to another folder (commands such as `poimen ingest` may run beside it)"
        )


class ServeLock:
    """The data folder's serve lock, held from `acquire()` until `release()` or the process ends."""

    def __init__(self, data_dir: Path) -> None:
        self._data_dir = data_dir
        self._descriptor: int | None = None

    @property
    def path(self) -> Path:
        """The lock file."""
        return self._data_dir / SERVE_LOCK_FILE

    def acquire(self) -> None:
        """Take the lock without waiting and write this process's pid into the file.

        Raises:
            DataDirInUseError: a live process holds it.
            OSError: the file cannot be created or locked (the folder is not writable).
        """
        # Not truncated on open: that would wipe the holder's pid before we learn it holds the lock.
        descriptor = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_pid(descriptor)
            os.close(descriptor)
            raise DataDirInUseError(self._data_dir, holder) from None
        except OSError:
            os.close(descriptor)
            raise
        os.ftruncate(descriptor, 0)
        os.write(descriptor, f"{os.getpid()}\n".encode("ascii"))
        self._descriptor = descriptor

    def release(self) -> None:
        """Give the lock up (closing the descriptor releases it). Idempotent; the file stays."""
        descriptor, self._descriptor = self._descriptor, None
        if descriptor is not None:
            with contextlib.suppress(OSError):
                os.close(descriptor)


def _read_pid(descriptor: int) -> int | None:
    """The pid the holder wrote; None when it has not written it yet or the file holds no number."""
    try:
        return int(os.pread(descriptor, 32, 0).decode("ascii").strip())
    except (OSError, UnicodeDecodeError, ValueError):
        return None
