"""The `poimen` command line: serve, migrate, ingest, reindex, query, export, import, eval (or `python -m app`)."""

from __future__ import annotations

import errno
import gc
import ipaddress
import logging
import os
import signal
import socket
import sys
import tempfile
from typing import TYPE_CHECKING

from app.cli.arguments import build_parser
from app.cli.interrupts import EXIT_INTERRUPTED, EXIT_TERMINATED, TerminatedError, run_interruptibly
from app.cli.serve_lock import DataDirInUseError, ServeLock
from app.config import ConfigurationError, Settings, load_settings, shared_database_problem
from app.domain.errors import EngineError
from app.misspelt_settings import misspelt_settings_lines

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Sequence
    from pathlib import Path

EXIT_CONFIGURATION = 2
EXIT_FAILURE = 1


def _address_in_use(host: str, port: int) -> str | None:
    """Why `host:port` cannot be listened on now (another process holds it), or None.

    A probe bind with `SO_REUSEADDR`, as uvicorn binds: a port in TIME_WAIT is free to it. Another process
    may still take the port before uvicorn does; uvicorn then says so, as before.
    """
    try:
        family, kind, protocol, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        with socket.socket(family, kind, protocol) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(address)
    except OSError as error:
        return error.strerror or str(error)
    return None


def _unwritable_data_dir(settings: Settings) -> str | None:
    """Why `POIMEN_DATA_DIR` (or its `postgres`/`lexical` folders) cannot be written by this process, or None.

    Read-only, another user's, immutable, or a file in the way. A probe file with no name (`O_TMPFILE` where
    the system has it) is opened in each folder there is; the folder is created when missing, as a start would.
    """
    folder = settings.poimen_data_dir
    probed = folder
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for probed in (folder, folder / "postgres", folder / "lexical"):
            if probed != folder and probed.exists() and not probed.is_dir():  # a file where a start puts its folder
                raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(probed))
            if probed == folder or probed.is_dir():
                with tempfile.TemporaryFile(dir=probed):
                    pass
    except OSError as error:
        return (
            f"cannot use POIMEN_DATA_DIR {probed}: {_os_reason(error)};"
            " make it a folder this user can write, or set POIMEN_DATA_DIR to one"
        )
    return None


def _take_serve_lock(serve_lock: ServeLock, settings: Settings) -> str | None:
    """Why this server may not serve its data folder (another server holds it), or None once the lock is held.

    Only where the lexical index is embedded (tantivy in `POIMEN_DATA_DIR`: readers and writers in the process,
    so what one server writes another finds lexically only seconds later, through the outbox). The embedded
    PostgreSQL is a server several processes share: replicas on it with `OPENSEARCH_URL` set are served.
    """
    if settings.opensearch_url is not None:
        return None
    try:
        serve_lock.acquire()
    except DataDirInUseError as error:
        return str(error)
    return None


def _os_reason(error: OSError) -> str:
    """Why a path could not be used, in the system's words; but a file where a folder must be says so.

    `mkdir` of a folder whose name a file holds says "File exists", which reads as if the folder were fine.
    """
    if isinstance(error, FileExistsError) and error.filename and not os.path.isdir(error.filename):  # noqa: PTH112 - a str or bytes name
        return f"{os.strerror(errno.ENOTDIR)} (a file has its name)"
    return error.strerror or str(error)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _serve(settings: Settings, *, host: str | None, port: int | None, warnings: Sequence[str] = ()) -> int:
    import uvicorn  # noqa: PLC0415 - only the server needs it

    from app.api.app import create_app  # noqa: PLC0415 - keeps `poimen --help` fast
    from app.api.open_connections import (  # noqa: PLC0415 - keeps `poimen --help` fast
        KEEP_ALIVE_TIMEOUT_S,
        AccessLoggedHttpToolsProtocol,
        CappedHttpToolsProtocol,
        listen_backlog,
        raise_descriptor_limit,
    )
    from app.observability.logs import configure_logging  # noqa: PLC0415 - keeps `poimen --help` fast
    from app.wiring.vocabulary import read_query_vocabulary  # noqa: PLC0415 - keeps `poimen --help` fast

    if settings.query_vocabulary_path is not None:
        # Checked before any engine starts (one line, exit 2); the services reuse what was read here.
        read_query_vocabulary(settings.query_vocabulary_path)

    terminal = sys.stderr.isatty()
    # Before anything logs: JSON lines carrying trace ids (uvicorn's loggers propagate here, log_config=None).
    # From here on, every line goes through logging, so a container's log stream is JSON from its first line.
    configure_logging(settings.log_level, json=not terminal if settings.log_json == "auto" else settings.log_json)
    serve_logger = logging.getLogger("poimen.serve")
    for warning in warnings:
        serve_logger.warning("%s", warning)
    if settings.log_level != "DEBUG":
        _quiet_libraries(own_progress_bars=False)
        if terminal:  # the greeting says where it listens; uvicorn's lifecycle lines stay in container logs
            logging.getLogger("uvicorn.error").setLevel(logging.WARNING)
    bind_host = host or settings.poimen_host
    bind_port = port if port is not None else settings.poimen_port
    if settings.auth_mode == "off":
        if not _is_loopback(bind_host):
            serve_logger.error(
                "refusing to serve on %s with AUTH_MODE=off: bind 127.0.0.1 or set AUTH_MODE=jwt", bind_host
            )
            return EXIT_CONFIGURATION
        serve_logger.warning("auth is off (AUTH_MODE=off): serving on %s:%d, loopback only", bind_host, bind_port)
    unusable = _unwritable_data_dir(settings)
    if unusable is not None:
        # Before the port, the engines and the model (10 s or more): it failed as uvicorn's start-up, exit 3.
        serve_logger.error("%s", unusable)
        return EXIT_CONFIGURATION
    serve_lock = ServeLock(settings.poimen_data_dir)
    in_use = _take_serve_lock(serve_lock, settings)
    if in_use is not None:
        # Before the port (the same port is the usual second mistake) and the model, in one line.
        serve_logger.error("%s", in_use)
        return EXIT_CONFIGURATION
    taken = _address_in_use(bind_host, bind_port)
    if taken is not None:
        # Before the engines and the model start (10 s or more), not after them.
        serve_logger.error("cannot serve on %s:%d: %s", bind_host, bind_port, taken)
        serve_lock.release()
        return EXIT_FAILURE
    # uvicorn drains in-flight requests and runs the lifespan shutdown on SIGTERM, then re-raises the signal
    # to the handler it found; a no-op one makes that graceful stop exit 0 instead of dying by SIGTERM.
    signal.signal(signal.SIGTERM, lambda _signal_number, _frame: None)
    descriptor_limit = raise_descriptor_limit()  # a container's soft limit is often 1,024 under a far higher hard one
    uvicorn.run(
        create_app(settings, on_ready=_when_ready(_first_lines(settings, bind_host, bind_port) if terminal else None)),
        host=bind_host,
        port=bind_port,
        # A request head over 64 KiB is a 431, not buffered whatever its size; connections stay under the
        # descriptor limit (app/api/open_connections.py). What it refuses before the app is access-logged too.
        http=AccessLoggedHttpToolsProtocol if settings.access_log_enabled else CappedHttpToolsProtocol,
        timeout_keep_alive=KEEP_ALIVE_TIMEOUT_S,  # longer than an ingress keeps an idle upstream connection
        backlog=listen_backlog(descriptor_limit),  # a flood accepted at once stays within the descriptors
        log_config=None,
        access_log=False,
        server_header=False,  # a version banner helps nobody but a scanner
        timeout_graceful_shutdown=20,
    )
    serve_lock.release()  # after the engines closed: the embedded PostgreSQL stopped with them
    return 0


def _migrate(settings: Settings) -> int:
    # Only the schema's modules: the migration Job must not load torch or the model.
    from app.domain.errors import SearchServiceError  # noqa: PLC0415 - only this command needs it here
    from app.wiring.migrate import migrate  # noqa: PLC0415 - heavy imports only for this command

    try:
        dimensions = run_interruptibly(migrate(settings), command="migrate")
    except ConfigurationError as error:
        print(str(error), file=sys.stderr)
        return EXIT_CONFIGURATION
    except SearchServiceError as error:  # the database cannot be reached, or refused the login
        print(f"migrate failed: {error.message}", file=sys.stderr)
        return EXIT_FAILURE
    print(f"schema at head ({dimensions}-dimension embeddings)", file=sys.stderr)
    if settings.database_runtime_role is not None:
        print(f"runtime role {settings.database_runtime_role} granted", file=sys.stderr)
    return 0


def _ingest(settings: Settings, *, path: Path, project: str, batch_size: int) -> int:
    from app.cli.commands import ingest  # noqa: PLC0415 - heavy imports only for this command

    return run_interruptibly(ingest(settings, path=path, project=project, batch_size=batch_size), command="ingest")


def _reindex(settings: Settings, *, project: str) -> int:
    from app.cli.commands import reindex  # noqa: PLC0415 - heavy imports only for this command

    return run_interruptibly(reindex(settings, project=project), command="reindex")


def _quiet_libraries(*, own_progress_bars: bool) -> None:
    """No progress bars or advisory warnings from the model libraries; the command's own lines stay.

    Set before the libraries are imported (they read these once). Without it every command that loads
    the model printed a "Loading weights" bar and transformers' advisories between its own lines.
    `own_progress_bars=False` (the server) also turns off every tqdm bar, ours included.
    """
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    if not own_progress_bars:
        os.environ.setdefault("TQDM_DISABLE", "1")


def _when_ready(greet: Callable[[], None] | None) -> Callable[[], None]:
    """What `poimen serve` does once every engine is open: freeze the start-up heap, then greet a terminal."""

    def ready() -> None:
        # Start-up objects (the tokenizer, the routes, torch when the model was exported) live as long as the
        # process. Frozen out of the cyclic collector, its full passes no longer walk them: under load each
        # such pass held the event loop for about 330 ms, 8 times in 20 s at 16 clients (gc.callbacks probe,
        # docs/benchmarks/gc-freeze.md). Only in the server: a test process builds many apps and must
        # collect them.
        gc.collect()
        gc.freeze()
        if greet is not None:
            greet()

    return ready


def _first_lines(settings: Settings, host: str, port: int) -> Callable[[], None]:
    """What a person at a terminal needs once the service is ready: where, what data, auth, a first query."""
    url = f"http://{host}:{port}"
    database = "external PostgreSQL (DATABASE_URL)" if settings.database_url else "embedded PostgreSQL"
    lexical = "OpenSearch (OPENSEARCH_URL)" if settings.opensearch_url else "embedded BM25"
    auth = "off (loopback only)" if settings.auth_mode == "off" else "JWT bearer tokens required"
    lines = [
        f"Poimen Memory Search is ready at {url}",
        f"  data   {settings.poimen_data_dir.resolve()} ({database}, {lexical})",
        f"  auth   {auth}",
        f"  try    curl -s '{url}/memory/query?query=hello&project=demo'",
        f"  api    {url}/schema (OpenAPI)",
    ]

    def show() -> None:
        print("\n".join(lines), file=sys.stderr, flush=True)

    return show


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `poimen` console script."""
    arguments = build_parser().parse_args(argv)
    try:
        settings = load_settings()
    except ConfigurationError as error:
        print(str(error), file=sys.stderr)
        return EXIT_CONFIGURATION
    command = arguments.command
    # Said first, as one WARNING each (a log record under `serve`): a misspelt setting is otherwise ignored in silence.
    misspelt = misspelt_settings_lines(os.environ)
    if command != "serve":
        for line in misspelt:
            print(f"warning: {line}", file=sys.stderr)
    # Every command that drains the outbox into its lexical index: `query` refills an index of an older
    # format, `eval` indexes its data set; over a shared database each would take other processes' entries.
    writers = {"serve", "ingest", "reindex", "import", "query", "eval"}
    problem = shared_database_problem(settings) if command in writers else None
    if problem is not None:
        print(problem, file=sys.stderr)
        return EXIT_CONFIGURATION
    # Commands that read what is there: on a mistyped POIMEN_DATA_DIR they created a whole new database
    # (39 MB) to report that it held nothing. A configuration error is still the first thing said (exit 2).
    if command == "query" and settings.query_vocabulary_path is not None:
        status = _run(command, lambda: _read_vocabulary(settings))
        if status:
            return status
    missing = _no_embedded_data(settings) if command in {"query", "export", "reindex"} else None
    if missing is not None:
        print(missing, file=sys.stderr)
        return EXIT_FAILURE
    commands: dict[str, Callable[[], int]] = {
        "serve": lambda: _serve(settings, host=arguments.host, port=arguments.port, warnings=misspelt),
        "migrate": lambda: _migrate(settings),
        "ingest": lambda: _ingest(
            settings, path=arguments.path, project=arguments.project, batch_size=arguments.batch_size
        ),
        "reindex": lambda: _reindex(settings, project=arguments.project),
        "query": lambda: _query(settings, arguments),
        "export": lambda: _export(settings, arguments),
        "import": lambda: _import(settings, arguments),
        "eval": lambda: _eval(settings, arguments),
    }
    if command != "serve" and settings.log_level != "DEBUG":
        _quiet_libraries(own_progress_bars=True)
    return _run(command, commands[command])


def _read_vocabulary(settings: Settings) -> int:
    """0 once the query vocabulary file reads (cached for the services); a bad one raises `ConfigurationError`."""
    from app.wiring.vocabulary import read_query_vocabulary  # noqa: PLC0415 - only when a file is configured

    if settings.query_vocabulary_path is not None:
        read_query_vocabulary(settings.query_vocabulary_path)
    return 0


def _no_embedded_data(settings: Settings) -> str | None:
    """Why the embedded default has nothing to read (no database under POIMEN_DATA_DIR yet), or None."""
    # PG_VERSION: initdb's first file; an empty folder (a failed first start, a restore not yet done) holds nothing.
    if settings.database_url is not None or (settings.embedded_postgres_dir / "PG_VERSION").is_file():
        return None
    return (
        f"no data under {settings.poimen_data_dir} (POIMEN_DATA_DIR): nothing was ingested there; "
        "check the folder, or ingest first"
    )


def _run(command: str, run: Callable[[], int]) -> int:
    """`run()`'s exit status; what a command can fail with, as one line and its status instead of a traceback."""
    try:
        return run()
    except ConfigurationError as error:  # a setting read only when a command builds its services
        print(str(error), file=sys.stderr)
        return EXIT_CONFIGURATION
    except EngineError as error:
        # An engine that cannot be reached (a wrong URL, a server down or restarting): one line, not a traceback.
        print(f"poimen {command}: {error.message}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt as interruption:
        # Ctrl-C: what was committed stands (each batch is a transaction) and the data folder stays usable;
        # one line instead of asyncio's forty of traceback. 130 is the shells' status for SIGINT, 143 for
        # SIGTERM (a `TerminatedError`), which stops a command the same way.
        terminated = isinstance(interruption, TerminatedError)
        print(f"poimen {command}: {'terminated (SIGTERM)' if terminated else 'interrupted'}", file=sys.stderr)
        return EXIT_TERMINATED if terminated else EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`poimen export | head`): what was written stands, the rest is not wanted.
        # Nothing more goes to that pipe, Python's exit flush included; a failure status, as the output is cut.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FAILURE
    except OSError as error:
        # A path the command cannot use (POIMEN_DATA_DIR under a file, a folder it may not write): one line.
        where = f" {error.filename}" if error.filename else ""
        print(f"poimen {command}: cannot use{where}: {_os_reason(error)}", file=sys.stderr)
        return EXIT_FAILURE


def _eval(settings: Settings, arguments: argparse.Namespace) -> int:
    from app.cli.eval_command import run_eval  # noqa: PLC0415 - heavy imports only for this command

    return run_eval(settings, arguments)


def _query(settings: Settings, arguments: argparse.Namespace) -> int:
    from app.cli.memory_commands import query  # noqa: PLC0415 - heavy imports only for this command
    from app.domain.models import SearchStrategy  # noqa: PLC0415 - as above

    strategy = SearchStrategy(arguments.strategy) if arguments.strategy else None
    return run_interruptibly(
        query(
            settings,
            texts=arguments.texts,
            project=arguments.project,
            limit=arguments.limit,
            strategy=strategy,
            as_json=arguments.json,
        ),
        command="query",
    )


def _export(settings: Settings, arguments: argparse.Namespace) -> int:
    from app.cli.memory_commands import export_project  # noqa: PLC0415 - heavy imports only for this command

    return run_interruptibly(
        export_project(settings, project=arguments.project, output=arguments.output), command="export"
    )


def _import(settings: Settings, arguments: argparse.Namespace) -> int:
    from app.cli.memory_commands import import_project  # noqa: PLC0415 - heavy imports only for this command

    return run_interruptibly(import_project(settings, path=arguments.path, project=arguments.project), command="import")
