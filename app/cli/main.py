"""The `poimen` command line: serve, migrate, ingest, reindex, query, export, import, eval (or `python -m app`)."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from app.cli.arguments import build_parser
from app.cli.data_folder import no_embedded_data, os_reason
from app.cli.exit_status import EXIT_CONFIGURATION, EXIT_FAILURE
from app.cli.interrupts import EXIT_INTERRUPTED, EXIT_TERMINATED, TerminatedError, run_interruptibly
from app.cli.quiet_libraries import quiet_libraries
from app.cli.serve_command import serve
from app.config import ConfigurationError, load_settings, shared_database_problem
from app.domain.errors import SearchServiceError
from app.misspelt_settings import misspelt_settings_lines

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Sequence
    from pathlib import Path

    from app.config import Settings


def _migrate(settings: Settings) -> int:
    # Only the schema's modules: the migration Job must not load torch or the model.
    from app.wiring.migrate import migrate  # noqa: PLC0415 - heavy imports only for this command

    # A database that cannot be reached or refused the login, a lock that stayed held: `_run` says it, as it does
    # for every command ("poimen migrate: ...", exit 1; a bad setting exit 2).
    dimensions = run_interruptibly(migrate(settings), command="migrate")
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
    if command in {"query", "export", "reindex"}:
        status = _run(command, lambda: _refuse_without_data(settings))
        if status:
            return status
    commands: dict[str, Callable[[], int]] = {
        "serve": lambda: serve(settings, host=arguments.host, port=arguments.port, warnings=misspelt),
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
        quiet_libraries(own_progress_bars=True)
    return _run(command, commands[command])


def _read_vocabulary(settings: Settings) -> int:
    """0 once the query vocabulary file reads (cached for the services); a bad one raises `ConfigurationError`."""
    from app.wiring.vocabulary import read_query_vocabulary  # noqa: PLC0415 - only when a file is configured

    if settings.query_vocabulary_path is not None:
        read_query_vocabulary(settings.query_vocabulary_path)
    return 0


def _refuse_without_data(settings: Settings) -> int:
    """0 when there is data to read; else the reason on stderr and 1 (a file in the folder's place raises)."""
    missing = no_embedded_data(settings)
    if missing is None:
        return 0
    print(missing, file=sys.stderr)
    return EXIT_FAILURE


def _run(command: str, run: Callable[[], int]) -> int:
    """`run()`'s exit status; what a command can fail with, as one line and its status instead of a traceback."""
    try:
        return run()
    except ConfigurationError as error:  # a setting read only when a command builds its services
        print(str(error), file=sys.stderr)
        return EXIT_CONFIGURATION
    except SearchServiceError as error:
        # An engine that cannot be reached (a wrong URL, a server down or restarting), or anything else the service
        # refuses (`migrate` said these as "migrate failed: ..."): one line, not a traceback.
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
        print(f"poimen {command}: cannot use{where}: {os_reason(error)}", file=sys.stderr)
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
