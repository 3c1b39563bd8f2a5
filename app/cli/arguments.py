"""The `poimen` command line's arguments: each command, its options and how a bad value is refused (exit 2)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from app.domain.project_ids import PROJECT_ID_RULE, is_project_id
from app.query.validation import MAX_LIMIT, MIN_LIMIT

if TYPE_CHECKING:
    from collections.abc import Callable

MAX_PORT = 65535
MAX_BATCH_SIZE = 100_000  # documents per transaction; far past any useful size, and islice's limit is far above


def _project_id(text: str) -> str:
    """`--project`: a project id the HTTP API can address, or an argparse error (exit 2) saying what one is."""
    if not is_project_id(text):
        msg = f"{text!r} is not a project id ({PROJECT_ID_RULE})"
        raise argparse.ArgumentTypeError(msg)
    return text


def _host(text: str) -> str:
    """`--host`: a bind address or name; an empty one is refused (it served on POIMEN_HOST instead, in silence)."""
    if not text.strip():
        msg = f"{text!r} is not a host: give an address (127.0.0.1, 0.0.0.0, ::) or a name"
        raise argparse.ArgumentTypeError(msg)
    return text


def _whole_number(low: int, high: int | None = None, *, named: str | None = None) -> Callable[[str], int]:
    """An argparse type for a whole number in `[low, high]` (no upper bound when `high` is None).

    `poimen ingest --batch-size 0` ingested nothing and said "0 created" with exit 0, and `-5` ended in
    a traceback; `poimen query --limit 0` started every engine before it was refused; `--port 0` served
    on 8080 instead, and a negative one crashed uvicorn. `named` words the refusal ("a port (1-65535)").
    """
    bounds = f"from {low} to {high}" if high is not None else f"of {low} or more"
    expected = named or f"a whole number {bounds}"

    def parse(text: str) -> int:
        try:
            number = int(text)
        except ValueError:
            number = None
        if number is None or number < low or (high is not None and number > high):
            msg = f"{text!r} is not {expected}"
            raise argparse.ArgumentTypeError(msg)
        return number

    return parse


EPILOG = (
    "Settings come from the environment (POIMEN_DATA_DIR, DATABASE_URL, OPENSEARCH_URL, EMBEDDING_MODEL, ...: "
    "README.md). Exit status: 0 done; 1 failed; 2 bad arguments or settings, or a file `import` or `eval` "
    "refuses; 130 interrupted (Ctrl-C); 143 terminated (SIGTERM)."
)
PROJECT_HELP = f"project id: {PROJECT_ID_RULE}"


def _command(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], name: str, summary: str, details: str = ""
) -> argparse.ArgumentParser:
    """A subcommand whose `--help` says what it does (`summary`, then `details`), not only its options."""
    description = f"{summary[0].upper()}{summary[1:]}." + (f" {details}" if details else "")
    return commands.add_parser(name, help=summary, description=description, epilog=EPILOG)


def build_parser() -> argparse.ArgumentParser:
    """The `poimen` argument parser."""
    parser = argparse.ArgumentParser(
        prog="poimen", description="Poimen Memory Search: hybrid retrieval service.", epilog=EPILOG
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve = _command(commands, "serve", "run the HTTP service (embedded engines unless URLs are set)")
    serve.add_argument("--host", type=_host, default=None, help="bind address (default POIMEN_HOST, 127.0.0.1)")
    serve.add_argument(
        "--port",
        type=_whole_number(1, MAX_PORT, named=f"a port (1-{MAX_PORT})"),
        default=None,
        help="port 1-65535 (default POIMEN_PORT, 8080)",
    )
    _command(
        commands,
        "migrate",
        "apply the PostgreSQL schema (alembic upgrade head)",
        "To DATABASE_URL, or to the embedded database under POIMEN_DATA_DIR when it is unset; running it "
        "again changes nothing.",
    )
    ingest = _command(
        commands,
        "ingest",
        "ingest a folder of markdown/text files or a BEIR corpus.jsonl",
        "Every document is checked before any is written; a path with none to ingest exits 1.",
    )
    ingest.add_argument("path", type=Path, help="a folder of .md/.markdown/.txt notes, one such file, or a .jsonl")
    ingest.add_argument("--project", required=True, type=_project_id, help=PROJECT_HELP)
    ingest.add_argument(
        "--batch-size",
        type=_whole_number(1, MAX_BATCH_SIZE),
        default=64,
        help=f"documents written per transaction (1-{MAX_BATCH_SIZE}, default 64)",
    )
    reindex = _command(
        commands,
        "reindex",
        "rebuild a project's lexical index from PostgreSQL",
        "A project without documents (a misspelt name) exits 1.",
    )
    reindex.add_argument("--project", required=True, type=_project_id, help=PROJECT_HELP)
    query = _command(
        commands,
        "query",
        "search a project: a table of results, or --json",
        "A query the service refuses, or a project without documents, makes the status 1.",
    )
    query.add_argument(
        "texts",
        nargs="+",
        metavar="QUERY",
        help="one or more queries; one that starts with '-' (an excluded term) goes after `--`: "
        "poimen query --project p -- '-draft release notes'",
    )
    query.add_argument("--project", required=True, type=_project_id, help=PROJECT_HELP)
    query.add_argument(
        "--limit",
        type=_whole_number(MIN_LIMIT, MAX_LIMIT),
        default=None,
        help=f"results per query, {MIN_LIMIT}-{MAX_LIMIT} (default RRF_FINAL_K)",
    )
    query.add_argument(
        "--strategy",
        choices=["hybrid", "semantic", "lexical", "cascading"],
        default=None,
        help="retrieval strategy (default SEARCH_STRATEGY)",
    )
    query.add_argument("--json", action="store_true", help="print the HTTP response shape, one JSON line per query")
    export = _command(
        commands,
        "export",
        "write a project as JSON lines, embeddings included",
        "A project without documents exits 1 and writes nothing.",
    )
    export.add_argument("--project", required=True, type=_project_id, help=PROJECT_HELP)
    export.add_argument(
        "--output",
        type=Path,
        default=None,
        help="file to write, under a temporary name until complete (default: stdout)",
    )
    load = _command(
        commands,
        "import",
        "read an export into this service's engines without re-embedding",
        "The whole file is checked before anything is written. Its documents replace the stored ones of the "
        "same id; the project's other documents are kept.",
    )
    load.add_argument("path", type=Path, help="a file `poimen export` wrote")
    load.add_argument(
        "--project", default=None, type=_project_id, help="import into this project (default: the exported one)"
    )
    evaluate = _command(commands, "eval", "evaluate retrieval quality on a BEIR-layout data set")
    from app.evaluation.cli import add_eval_arguments  # noqa: PLC0415 - keeps the parser definition in one place

    add_eval_arguments(evaluate)
    return parser
