"""Export and import of a project as JSON lines, embeddings included: a project moves without re-embedding.

The first line is a header naming the format, the project, the embedding model and its dimension; each
following line is one document with its chunks, and each chunk carries its embedding and the model that
made it; the last line (since version 2) says how many documents came before it, so a file cut after a
whole line is refused as one cut inside a line is. Importing writes through `DocumentStore.save_documents`
exactly what was exported (content hashes included, so a later ingest of an unchanged document stays
"unchanged", and each document's version as a floor for its new one), queues the lexical index as any write
does, and calls no embedder. A file made with another
model or dimension is refused: vectors of two models are not comparable. Each document line carries a
`record_hash` over the rest of it (the header's `record_hashes` says so), and a line edited since the export is
refused: its content hash would vouch for text it no longer holds (`app.ingestion.record_hashes`). Files from
before record hashes are read unverified, and readers from before them skip the field: the version stays 2.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final

from app.domain.catalog import DocumentSelection
from app.domain.document_versions import RestoreFloor
from app.domain.errors import DocumentNotFoundError, InvalidInputError
from app.domain.project_ids import PROJECT_ID_RULE, is_project_id
from app.ingestion.record_hashes import RECORD_HASH_ALGORITHM, record_hash, record_hash_problem
from app.ingestion.transfer_records import (
    RecordCheck,
    RecordFieldError,
    document_from_record,
    document_record,
    json_kind,
)
from app.ingestion.validation import is_addressable

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator, Iterable, Iterator, Sequence

    from app.domain.models import EmbeddedChunk, StoredDocument
    from app.domain.ports import DocumentStore, ProjectSnapshot

EXPORT_FORMAT: Final = "poimen-export"
EXPORT_VERSION: Final = 2
READABLE_VERSIONS: Final = frozenset({1, EXPORT_VERSION})
"""Version 1 had no end line: such a file is still read, and a cut after a whole line goes unnoticed."""
PAGE_SIZE: Final = 200
PAGE_CHUNKS: Final = 2_000
"""At most this many chunks (with their vectors, ~15 KB each in memory) in one page, unless one document has more.

Pages of `PAGE_SIZE` documents alone held 200 documents of up to `MAX_DOCUMENT_BYTES` each with every
vector: several GiB for a project of large documents, in the pod that ran the export or import.
"""


@dataclass(frozen=True, slots=True)
class ImportReport:
    """What an import did, in documents read and chunks written (none embedded, always 0).

    Of the documents: `created`, `updated` (replaced by the exported version) and `unchanged` (stored with
    the exported content hash, so not written again).
    """

    project_id: str
    documents: int
    chunks: int
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    embedded: int = 0


async def export_lines(
    store: DocumentStore, project_id: str, *, model_name: str, dimensions: int
) -> AsyncGenerator[str]:
    """The export of a project, one JSON line at a time (header first), paging through it by document id.

    Every page is read from one snapshot (`DocumentStore.project_snapshot`): the export is the project as it
    stood when the first line was asked for, whatever is written meanwhile. Close the iterator (`aclosing`)
    when not reading it to the end, so the snapshot ends then and not when the iterator is collected.

    Raises `DocumentNotFoundError`, before the header, when the project holds no documents at that moment
    (deleted since the caller checked: an empty export would pass for a backup).
    """
    header = {
        "kind": "header",
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "project": project_id,
        "embedding_model": model_name,
        "dimensions": dimensions,
        "record_hashes": RECORD_HASH_ALGORITHM,
    }
    documents = 0
    async with store.project_snapshot(project_id) as snapshot:
        page = await _next_page(snapshot, project_id, after=None)
        if not page:
            msg = f"project {project_id!r} holds no documents"
            raise DocumentNotFoundError(msg)
        yield json.dumps(header)
        while page:
            for document, chunks in page:
                record = document_record(document, chunks)
                record["record_hash"] = record_hash(record)
                yield json.dumps(record, ensure_ascii=False)
            documents += len(page)
            page = await _next_page(snapshot, project_id, after=page[-1][0].document_id)
    yield json.dumps({"kind": "end", "documents": documents})


async def _next_page(
    snapshot: ProjectSnapshot, project_id: str, *, after: str | None
) -> list[tuple[StoredDocument, list[EmbeddedChunk]]]:
    return await snapshot.embedded_documents(
        project_id, after=after, limit=await _page_limit(snapshot, project_id, after)
    )


async def _page_limit(snapshot: ProjectSnapshot, project_id: str, after: str | None) -> int:
    """How many documents after `after` the next page takes: up to `PAGE_SIZE` within `PAGE_CHUNKS`, at least 1."""
    listed = await snapshot.list_documents(DocumentSelection(project_id=project_id), after=after, limit=PAGE_SIZE)
    return len(within_chunk_budget([summary.chunk_count for summary in listed])) or 1


def within_chunk_budget(chunk_counts: Sequence[int]) -> Sequence[int]:
    """The longest head of `chunk_counts` whose sum is at most `PAGE_CHUNKS`, or its first alone if that is over."""
    total = 0
    for taken, count in enumerate(chunk_counts):
        total += count
        if total > PAGE_CHUNKS:
            return chunk_counts[: max(taken, 1)]
    return chunk_counts


class NotJsonError(ValueError):
    """A line that Python's JSON reader takes but JSON does not hold, or that it cannot read."""


def _refuse_constant(name: str) -> float:
    # Python reads NaN and Infinity; JSON has no such numbers, and PostgreSQL's JSONB refused them
    # in the write, after the batches before it were written.
    msg = f"{name} is no JSON number"
    raise NotJsonError(msg)


def _parsed_line(line: str) -> object:
    """The JSON value of one line; `ValueError` (a `NotJsonError` for what JSON cannot hold) when it is none."""
    try:
        return json.loads(line, parse_constant=_refuse_constant)
    except RecursionError:
        msg = "its arrays or objects are nested too deeply to read"
        raise NotJsonError(msg) from None


def _checked_header(line: str, *, model_name: str, dimensions: int) -> dict[str, Any]:
    try:
        header = _parsed_line(line)
    except ValueError:
        header = None
    if not isinstance(header, dict) or header.get("format") != EXPORT_FORMAT:
        msg = f"not a {EXPORT_FORMAT} file: the first line must be its header"
        raise InvalidInputError(msg, field="header")
    if header.get("version") not in READABLE_VERSIONS:
        msg = f"export version {header.get('version')!r}; this service reads versions {sorted(READABLE_VERSIONS)}"
        raise InvalidInputError(msg, field="version")
    if header.get("embedding_model") != model_name or header.get("dimensions") != dimensions:
        msg = (
            f"exported with {header.get('embedding_model')!r} ({header.get('dimensions')} dimensions); this service "
            f"embeds with {model_name!r} ({dimensions}): set EMBEDDING_MODEL to match, or re-ingest the documents"
        )
        raise InvalidInputError(msg, field="embedding_model")
    if "project" not in header:  # a KeyError out of the import (a traceback), and `--project` or not, no export
        msg = "the header names no project: not a header `poimen export` writes"
        raise InvalidInputError(msg, field="project")
    if not isinstance(header["project"], str):  # converted: 123 was imported into the project "123"
        msg = f"the header's project is {json_kind(header['project'])}, not a string"
        raise InvalidInputError(msg, field="project")
    if header.get("record_hashes", RECORD_HASH_ALGORITHM) != RECORD_HASH_ALGORITHM:
        msg = f"the header's record_hashes is {header['record_hashes']!r}; this service reads {RECORD_HASH_ALGORITHM!r}"
        raise InvalidInputError(msg, field="record_hashes")
    return header


def _read_export(
    lines: Iterable[str], *, model_name: str, dimensions: int, project_id: str | None
) -> tuple[str, Iterator[tuple[StoredDocument, list[EmbeddedChunk]]]]:
    """The project an export goes into (its header checked now), and its documents as they are read.

    The documents raise `InvalidInputError` at the first line that is not one (or whose id no URL reaches).
    """
    # Numbered before blank lines are skipped, so an error names the line an editor shows.
    remaining = ((number, line) for number, line in enumerate(lines, start=1) if line.strip())
    _, first = next(remaining, (1, ""))
    header = _checked_header(first, model_name=model_name, dimensions=dimensions)
    target: str = project_id or header["project"]
    if not is_project_id(target):
        msg = f"project id {target!r} is not {PROJECT_ID_RULE}"
        raise InvalidInputError(msg, field="project")
    checked = RecordCheck(model_name=model_name, dimensions=dimensions)
    hashed = "record_hashes" in header
    return target, _documents(remaining, target, ends=header["version"] != 1, hashed=hashed, checked=checked)


def _documents(
    lines: Iterable[tuple[int, str]], target: str, *, ends: bool, hashed: bool, checked: RecordCheck
) -> Iterator[tuple[StoredDocument, list[EmbeddedChunk]]]:
    """The documents of the numbered non-blank lines after the header; with `ends`, closed by the end line.

    With `hashed`, each line's `record_hash` is checked last, so a line that is wrong in a way a field names
    is refused for that.
    """
    count = 0
    rest = iter(lines)
    for number, line in rest:
        try:
            record = _parsed_line(line)
        except ValueError as error:
            if not line.endswith("\n") and next(rest, None) is None:
                # A file cut inside its last line: say so, not that line N is corrupted.
                msg = f"line {number}: the file ends inside this line: cut off (was the export complete?)"
                raise InvalidInputError(msg, field=f"line {number}") from None
            raise _not_a_record(number, error) from None
        if ends and isinstance(record, dict) and record.get("kind") == "end":
            _check_end(record, count, number, rest)
            return
        try:
            document, embedded = document_from_record(record, project_id=target)
        except (ValueError, KeyError, TypeError) as error:
            raise _not_a_record(number, error) from None
        if not is_addressable(document.document_id):
            # The API refuses such an id (`validate_documents`): no URL could read or delete the document.
            msg = f"line {number}: document id {document.document_id!r} has an empty, '.' or '..' part"
            raise InvalidInputError(msg, field=f"line {number}")
        checked(document, embedded, number)
        if hashed and isinstance(record, dict) and (problem := record_hash_problem(record)) is not None:
            msg = f"line {number}: document {document.document_id[:80]!r}: {problem}"
            raise InvalidInputError(msg, field=f"line {number}")
        count += 1
        yield replace(document, project_id=target), embedded
    if ends:
        msg = f"cut off: the file ends after {count} documents without its end line (was the export complete?)"
        raise InvalidInputError(msg, field="end")


def _not_a_record(number: int, error: Exception) -> InvalidInputError:
    """What is wrong with a line, in the words of the export format rather than Python's."""
    if isinstance(error, KeyError):
        reason = f"the field {error.args[0]!r} is missing"
    elif isinstance(error, RecordFieldError):
        reason = str(error)
    elif isinstance(error, json.JSONDecodeError):
        reason = f"not JSON ({error.msg} at column {error.colno})"
    elif isinstance(error, NotJsonError):
        reason = f"not JSON ({error})"
    elif isinstance(error, ValueError):  # an event time or a date that is no ISO 8601 one, named with its value
        reason = f"a value cannot be read ({error})"
    else:
        reason = "a field holds the wrong kind of value (a number or a list where a string or list belongs?)"
    msg = f"line {number}: not a document record: {reason}"
    return InvalidInputError(msg, field=f"line {number}")


def _check_end(record: dict[str, Any], count: int, number: int, rest: Iterable[tuple[int, str]]) -> None:
    """The end line says `count` documents came before it, and nothing follows it."""
    stated = record.get("documents")
    if not isinstance(stated, int) or isinstance(stated, bool):  # "the end line counts '2' documents, ... holds 2"
        msg = f"line {number}: the end line's `documents` is {stated!r}, not a count of documents"
        raise InvalidInputError(msg, field="end")
    if stated != count:
        msg = f"line {number}: the end line counts {stated} documents, the file holds {count}"
        raise InvalidInputError(msg, field="end")
    if next(iter(rest), None) is not None:  # blank lines are not in `rest`
        msg = f"line {number}: lines follow the end line"
        raise InvalidInputError(msg, field="end")


def check_export(lines: Iterable[str], *, model_name: str, dimensions: int, project_id: str | None = None) -> int:
    """Read an export as `import_lines` does, writing nothing: how many documents it holds.

    Raises `InvalidInputError` for what `import_lines` would refuse, so a caller that reads the file twice
    (this, then `import_lines`) writes nothing from a file it refuses (a cut-off or corrupted export).
    """
    _, documents = _read_export(lines, model_name=model_name, dimensions=dimensions, project_id=project_id)
    return sum(1 for _ in documents)


async def import_lines(
    store: DocumentStore, lines: Iterable[str], *, model_name: str, dimensions: int, project_id: str | None = None
) -> ImportReport:
    """Write an export into the store (into `project_id`, or the project it names) without embedding anything.

    Written in transactions of `PAGE_SIZE` documents (fewer when they hold over `PAGE_CHUNKS` chunks) as it
    reads: check the file first (`check_export`) to write nothing from one that is refused part-way. A document
    stored with the exported content hash is left as it is (an ingest would call it unchanged); one stored
    with another is replaced by the exported one, newer or not: an import restores what was exported. A
    written document gets at least its exported version (higher where the store has counted past it): an ETag
    read before the move names no other content.
    """
    target, records = _read_export(lines, model_name=model_name, dimensions=dimensions, project_id=project_id)
    counts = {"documents": 0, "chunks": 0, "created": 0, "updated": 0, "unchanged": 0}
    batch: list[tuple[StoredDocument, list[EmbeddedChunk]]] = []
    batch_chunks = 0
    # The batches count versions as one save would: each new document its exported version where the project
    # had not counted past it before the import, not one past the highest version of the batches before.
    generation = await store.project_generation(target)
    floor = RestoreFloor(project_id=target, before=generation, left=generation)

    async def flush() -> None:
        nonlocal batch_chunks, floor
        keys = [(document.project_id, document.document_id) for document, _ in batch]
        async with store.lock_documents(keys):
            states = await store.document_states(keys)
            changed = []
            for document, embedded in batch:
                state = states.get((document.project_id, document.document_id))
                if state is not None and state.content_hash == document.content_hash:
                    counts["unchanged"] += 1
                else:
                    changed.append((document, embedded))
                    counts["chunks"] += len(embedded)
            if changed:
                # What the save created, not what was read: a delete by selection takes no document lock.
                saved = await store.save_documents(changed, restoring=floor)
                floor = replace(floor, left=saved.generations.get(target, floor.left))
                created = len(saved.created)
                counts["created"] += created
                counts["updated"] += len(changed) - created
        batch.clear()
        batch_chunks = 0

    for document, embedded in records:
        if batch and batch_chunks + len(embedded) > PAGE_CHUNKS:
            await flush()
        batch.append((document, embedded))
        batch_chunks += len(embedded)
        counts["documents"] += 1
        if len(batch) >= PAGE_SIZE:
            await flush()
    if batch:
        await flush()
    return ImportReport(project_id=target, **counts)
