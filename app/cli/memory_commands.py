"""`poimen query`, `poimen export` and `poimen import`: search and move a project on the same engines as the server.

`query` runs `SearchService` (the path of the HTTP API) with the cache off and prints a table (its score is
the API's `final_score`: in [0, 1], comparable across queries), or with `--json` the HTTP response shape
(one JSON line per query). It reads the knobs as `poimen serve` does (the environment, overlaid by
`POIMEN_FLAGS_FILE`) and reranks with `RERANKER`, so it answers what the API would. `export`/`import`
write and read a project as JSON lines with its embeddings (`app.ingestion.transfer`), so importing embeds nothing.
"""

from __future__ import annotations

import sys
from contextlib import ExitStack, aclosing
from typing import TYPE_CHECKING, Final, TextIO

from app.api.search_schemas import response_json, search_response
from app.cli.commands import drain_or_explain
from app.config import ConfigurationError
from app.domain.errors import DocumentNotFoundError, SearchServiceError
from app.domain.text_cuts import shortened
from app.ingestion.outbox import OutboxWorker
from app.ingestion.transfer import check_export, export_lines, import_lines
from app.query.planner import SearchOptions
from app.search.calls import SearchCall
from app.search.flags import FlagsFileError, knobs_from_settings, parse_flags_file
from app.search.knob_source import FixedKnobs
from app.search.service import SearchService
from app.wiring.engines import configured_model, open_engines
from app.wiring.rerankers import build_second_stage
from app.wiring.vocabulary import build_query_optimizer

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from app.config import Settings
    from app.domain.models import SearchStrategy
    from app.domain.results import SearchResult
    from app.knobs import SearchKnobs

SNIPPET_CHARS: Final = 70
CLI_SCOPE: Final = "cli"
MAX_PROJECTS_NAMED: Final = 10  # an export of an unknown project names this many it could have meant


def results_table(query: str, result: SearchResult, *, total_ms: float) -> str:
    """One search as a table: rank, `final_score`, each leg's rank, document and the start of the text."""
    lines = [f'"{query}": {result.strategy.value}, {len(result.hits)} results, {total_ms:.0f} ms']
    if result.degraded_reasons:
        lines.append("degraded: " + ", ".join(result.degraded_reasons))
    lines.append(f"{'rank':>4}  {'score':>8}  {'sem':>4}  {'lex':>4}  {'document':<32}  text")
    for rank, hit in enumerate(result.hits, start=1):
        snippet = shortened(" ".join(hit.chunk.text.split()), max_chars=SNIPPET_CHARS)
        semantic, lexical = (str(hit.ranks.get(leg, "-")) for leg in ("semantic", "lexical"))
        lines.append(
            f"{rank:>4}  {hit.readable_score:>8.4f}  {semantic:>4}  {lexical:>4}"
            f"  {hit.chunk.document_id[:32]:<32}  {snippet}"
        )
    return "\n".join(lines)


def command_line_knobs(settings: Settings) -> SearchKnobs:
    """The knobs `poimen serve` would search with now: the environment's, overlaid by `POIMEN_FLAGS_FILE`.

    The command read the environment's alone, so a flags file's `search_strategy` or `rrf_final_k` changed
    what the API answered and not what `poimen query` did. A flags file it cannot apply is a
    `ConfigurationError` (the server starts on the environment's knobs and waits for a good file; a one-off
    search has nothing to wait for). `FLAGS_PROVIDER=openfeature` evaluates flags per caller in a provider
    the command does not start: it searches with the environment's knobs and says so on stderr.
    """
    if settings.flags_provider == "openfeature":
        print(
            "warning: FLAGS_PROVIDER=openfeature: poimen query searches with the environment's knobs, not the"
            " provider's flags",
            file=sys.stderr,
        )
        return knobs_from_settings(settings)
    knobs = knobs_from_settings(settings)
    path = settings.poimen_flags_file
    if path is None:
        return knobs
    try:
        content = path.read_bytes()
        flags, _ = parse_flags_file(content, base=knobs, json_only=path.suffix.lower() == ".json")
    except OSError as error:
        msg = f"POIMEN_FLAGS_FILE {path}: cannot read: {error.strerror or error}"
        raise ConfigurationError(msg) from None
    except FlagsFileError as error:
        msg = f"POIMEN_FLAGS_FILE {path}: {error}"
        raise ConfigurationError(msg) from None
    return flags


async def query(  # noqa: PLR0913 - the command's options, each named
    settings: Settings,
    *,
    texts: Sequence[str],
    project: str,
    limit: int | None,
    strategy: SearchStrategy | None,
    as_json: bool,
) -> int:
    """Search `project` for each text and print a table (or JSON lines); 0 when every search answered.

    A query the service refuses (empty, too long) is named on stderr and the others still run; the status
    is then 1. So it is when nothing was found because the project holds no documents (a misspelt name:
    `reindex` and `export` refuse it alike), not when a project's documents simply do not match.
    """
    # A bad vocabulary file, flags file or reranker model stops the command before the engines start.
    optimizer = build_query_optimizer(settings)
    knobs = command_line_knobs(settings)
    second_stage = build_second_stage(settings)
    async with open_engines(settings) as engines:
        if engines.lexical_refill_projects:
            # No server may be running to refill it: searching now would find nothing on the lexical leg.
            await drain_or_explain(OutboxWorker.from_settings(settings, store=engines.store, lexical=engines.lexical))
        service = SearchService.over(
            vector=engines.vector,
            lexical=engines.lexical,
            embedder=engines.embedder,
            store=engines.store,
            knobs=FixedKnobs(knobs),
            second_stage=second_stage,
            optimizer=optimizer,
        )
        found_any = False
        refused = 0
        for text in texts:
            options = SearchOptions(project=project, limit=limit, strategy=strategy)
            try:
                outcome = await service.search(
                    SearchCall(query=text, options=options, auth_scope=CLI_SCOPE, caller_key=CLI_SCOPE)
                )
            except SearchServiceError as error:
                print(f"{text!r}: {error.message}", file=sys.stderr)
                refused += 1
                continue
            found_any = found_any or bool(outcome.result.hits)
            if as_json:
                print(response_json(search_response(text, outcome, explain=False)))
            else:
                print(results_table(text, outcome.result, total_ms=outcome.total_ms))
        if not found_any and project not in (known := await engines.store.project_ids()):
            # Nothing found because there is nothing to find: a misspelt project reads like unlucky queries.
            print(f"project {project!r} holds no documents ({_projects_named(known)})", file=sys.stderr)
            return 1
    return 1 if refused else 0


def _projects_named(known: Sequence[str]) -> str:
    listed = ", ".join(known[:MAX_PROJECTS_NAMED]) + (", ..." if len(known) > MAX_PROJECTS_NAMED else "")
    return f"projects: {listed or 'none'}"


async def export_project(settings: Settings, *, project: str, output: Path | None) -> int:
    """Write `project` as JSON lines (embeddings included) to `output` or stdout; 0 on success.

    A project without documents is refused (1) before anything is written: a misspelt name would
    otherwise leave a valid, empty export that a backup script takes for a good one. A file is written
    under a temporary name beside `output` and renamed when complete, so a failed export (a full disk)
    leaves the last good backup in place, never a cut-off one under its name.
    """
    documents = 0
    # A symlink is written through (renaming over it replaced the link itself), and a device or a pipe
    # (`/dev/stdout`, a FIFO) in place: renaming a file over one replaced it.
    target = None if output is None else output.resolve()  # noqa: ASYNC240 - once, before any engine starts
    in_place = target is not None and target.exists() and not target.is_file()
    partial = None if target is None or in_place else target.with_name(f".{target.name}.partial")
    # The model's name and dimensions go in the header; no text is embedded, so the model is not loaded.
    async with open_engines(settings, load_model_at_start=False) as engines:
        known = await engines.store.project_ids()
        if project not in known:
            print(
                f"project {project!r} holds no documents; nothing exported ({_projects_named(known)})", file=sys.stderr
            )
            return 1
        try:
            with ExitStack() as stack:
                destination = partial or target
                sink: TextIO = (
                    sys.stdout if destination is None else stack.enter_context(destination.open("w", encoding="utf-8"))
                )
                # Closed however the loop ends (a closed pipe, Ctrl-C), so its snapshot ends before the engines do.
                lines = export_lines(
                    engines.store,
                    project,
                    model_name=engines.embedder.model_name,
                    dimensions=engines.embedder.dimensions,
                )
                async with aclosing(lines):
                    async for line in lines:
                        sink.write(line + "\n")
                        documents += 1
            if partial is not None and target is not None:
                partial.replace(target)
        except OSError as error:
            print(f"cannot write {output or 'stdout'}: {error}; nothing exported", file=sys.stderr)
            return 1
        except DocumentNotFoundError:  # deleted since `project_ids`: nothing was written but the temporary file
            print(f"project {project!r} holds no documents (deleted just now); nothing exported", file=sys.stderr)
            return 1
        finally:
            # Renamed when complete; removed when not: a failed write, and a Ctrl-C or SIGTERM part-way.
            if partial is not None:
                partial.unlink(missing_ok=True)
    print(f"{documents - 2} documents of {project!r} exported", file=sys.stderr)  # less the header and end lines
    return 0


async def import_project(settings: Settings, *, path: Path, project: str | None) -> int:
    """Write an export into this service's engines without embedding; 0 on success, 2 for a file it refuses.

    The whole file is read and checked first (`check_export`), before any engine starts, so a file refused
    part-way (cut off, corrupted) writes nothing, and a refused file leaves a new data folder uncreated. A
    write that fails part-way says how far it got; what it wrote is indexed.
    """
    # The model's name and size as configured: open_engines checks the loaded model against both.
    model_name, dimensions = configured_model(settings)
    if path.is_dir():  # noqa: ASYNC240 - once, before any engine starts
        print(f"cannot read {path}: it is a folder; import reads one file written by `poimen export`", file=sys.stderr)
        return 2
    if path.exists() and not path.is_file():  # noqa: ASYNC240 - once, before any engine starts
        # Read twice, a pipe is empty the second time: the import stopped "part-way" having read nothing.
        print(
            f"cannot read {path}: {path} is not a regular file (a pipe or standard input?); an import reads its file"
            " twice, checked then written: write the export to a file first",
            file=sys.stderr,
        )
        return 2
    try:
        # utf-8-sig: an export opened and saved by an editor may start with a byte order mark; export writes none.
        with path.open(encoding="utf-8-sig") as source:
            check_export(source, project_id=project, model_name=model_name, dimensions=dimensions)
    except (OSError, UnicodeDecodeError) as error:
        print(f"cannot read {path}: {error}", file=sys.stderr)
        return 2
    except SearchServiceError as error:
        print(f"import refused, nothing written: {error.message}", file=sys.stderr)
        return 2
    # The file carries every vector: nothing is embedded, so the model (~0.5-1 GiB) is not loaded.
    async with open_engines(settings, load_model_at_start=False) as engines:
        model_name, dimensions = engines.embedder.model_name, engines.embedder.dimensions
        status = 0
        try:
            with path.open(encoding="utf-8-sig") as source:
                report = await import_lines(
                    engines.store, source, project_id=project, model_name=model_name, dimensions=dimensions
                )
            print(
                f"{report.documents} documents imported into {report.project_id!r}: {report.created} created,"
                f" {report.updated} updated (replaced by the exported version), {report.unchanged} unchanged;"
                f" {report.chunks} chunks written, embedded: {report.embedded}",
                file=sys.stderr,
            )
        except (OSError, SearchServiceError) as error:
            detail = error.message if isinstance(error, SearchServiceError) else str(error)
            print(f"import stopped part-way (earlier batches are written; run it again): {detail}", file=sys.stderr)
            status = 1
        await drain_or_explain(OutboxWorker.from_settings(settings, store=engines.store, lexical=engines.lexical))
    return status
