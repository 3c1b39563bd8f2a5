"""The `poimen` command line's arguments: each command, its options and how a bad value is refused (exit 2)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from app.domain.project_ids import PROJECT_ID_RULE, is_project_id
from app.query.planner import MAX_LIMIT, MIN_LIMIT

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


def build_parser() -> argparse.ArgumentParser:
    """The `poimen` argument parser."""
    parser = argparse.ArgumentParser(prog="poimen", description="Poimen Memory Search: hybrid retrieval service.")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the HTTP service (embedded engines unless URLs are set)")
    serve.add_argument("--host", default=None, help="bind address (default POIMEN_HOST, 127.0.0.1)")
    serve.add_argument(
        "--port",
        type=_whole_number(1, MAX_PORT, named=f"a port (1-{MAX_PORT})"),
        default=None,
        help="port 1-65535 (default POIMEN_PORT, 8080)",
    )
    commands.add_parser("migrate", help="apply the PostgreSQL schema (alembic upgrade head)")
    ingest = commands.add_parser("ingest", help="ingest a folder of markdown/text files or a BEIR corpus.jsonl")
    ingest.add_argument("path", type=Path)
    ingest.add_argument("--project", required=True, type=_project_id)
    ingest.add_argument(
        "--batch-size",
        type=_whole_number(1, MAX_BATCH_SIZE),
        default=64,
        help=f"documents written per transaction (1-{MAX_BATCH_SIZE}, default 64)",
    )
    reindex = commands.add_parser("reindex", help="rebuild a project's lexical index from PostgreSQL")
    reindex.add_argument("--project", required=True, type=_project_id)
    query = commands.add_parser("query", help="search a project: a table of results, or --json")
    query.add_argument(
        "texts",
        nargs="+",
        metavar="QUERY",
        help="one or more queries; one that starts with '-' (an excluded term) goes after `--`: "
        "poimen query --project p -- '-draft release notes'",
    )
    query.add_argument("--project", required=True, type=_project_id)
    query.add_argument(
        "--limit",
        type=_whole_number(MIN_LIMIT, MAX_LIMIT),
        default=None,
        help=f"results per query, {MIN_LIMIT}-{MAX_LIMIT} (default RRF_FINAL_K)",
    )
    query.add_argument("--strategy", choices=["hybrid", "semantic", "lexical", "cascading"], default=None)
    query.add_argument("--json", action="store_true", help="print the HTTP response shape, one JSON line per query")
    export = commands.add_parser("export", help="write a project as JSON lines, embeddings included")
    export.add_argument("--project", required=True, type=_project_id)
    export.add_argument("--output", type=Path, default=None, help="file to write (default: stdout)")
    load = commands.add_parser("import", help="read an export into this service's engines without re-embedding")
    load.add_argument("path", type=Path)
    load.add_argument(
        "--project", default=None, type=_project_id, help="import into this project (default: the exported one)"
    )
    evaluate = commands.add_parser("eval", help="evaluate retrieval quality on a BEIR-layout data set")
    from app.evaluation.cli import add_eval_arguments  # noqa: PLC0415 - keeps the parser definition in one place

    add_eval_arguments(evaluate)
    return parser
