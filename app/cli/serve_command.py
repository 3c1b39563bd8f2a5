"""`poimen serve`: the checks said before the port, the engines and the model start, then uvicorn."""

from __future__ import annotations

import gc
import ipaddress
import logging
import signal
import socket
import sys
from typing import TYPE_CHECKING

from app.cli.data_folder import unwritable_data_dir
from app.cli.exit_status import EXIT_CONFIGURATION, EXIT_FAILURE
from app.cli.quiet_libraries import quiet_libraries
from app.cli.serve_lock import DataDirInUseError, ServeLock

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from app.config import Settings


def serve(settings: Settings, *, host: str | None, port: int | None, warnings: Sequence[str] = ()) -> int:
    """Serve HTTP until stopped (0); a refusal said before the port and the model start is 2, a port in use 1."""
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
    from app.wiring.engines import embedded_postgres_refusal  # noqa: PLC0415 - keeps `poimen --help` fast
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
        quiet_libraries(own_progress_bars=False)
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
    # The path first: it creates nothing (the other check creates the folder). The other commands say the same
    # line when their start raises it; serve said it as uvicorn's start-up failure, after the model, exit 3.
    unusable = embedded_postgres_refusal(settings) or unwritable_data_dir(settings)
    if unusable is not None:
        # Before the port, the engines and the model (10 s or more): it failed as uvicorn's start-up, exit 3.
        serve_logger.error("%s", unusable)
        return EXIT_CONFIGURATION
    serve_lock = ServeLock(settings.poimen_data_dir)
    in_use = take_serve_lock(serve_lock, settings)
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


def take_serve_lock(serve_lock: ServeLock, settings: Settings) -> str | None:
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


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


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
