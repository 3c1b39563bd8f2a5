"""Export and import as JSON lines between two in-memory stores: the same documents and vectors, no embedder."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from app.domain.errors import InvalidInputError
from app.domain.models import EmbeddedChunk, StoredDocument
from app.engines.memory import InMemoryDocumentStore
from app.ingestion.content_hashes import chunk_hash, embedding_text
from app.ingestion.transfer import check_export, export_lines, import_lines
from tests.contract import document_store

MODEL, DIMENSIONS = "test-model", 384


def entry(
    project_id: str, document_id: str, n_chunks: int, **kwargs: str
) -> tuple[StoredDocument, list[EmbeddedChunk]]:
    """The contract suite's document, its chunks hashed as ingest hashes them (an import checks the hashes)."""
    document, embedded = document_store.entry(project_id, document_id, n_chunks, **kwargs)
    hashed = [
        EmbeddedChunk(
            replace(item.chunk, chunk_hash=chunk_hash(embedding_text(item.chunk))), item.embedding, item.embedding_model
        )
        for item in embedded
    ]
    return replace(document, chunks=tuple(item.chunk for item in hashed)), hashed


async def exported(store: InMemoryDocumentStore, project: str) -> list[str]:
    return [line async for line in export_lines(store, project, model_name=MODEL, dimensions=DIMENSIONS)]


async def test_an_export_imports_into_another_store_with_the_same_documents_and_vectors() -> None:
    source, target = InMemoryDocumentStore(), InMemoryDocumentStore()
    await source.save_documents([entry("p", "a", 2), entry("p", "b/1", 1), entry("other", "c", 1)])
    lines = await exported(source, "p")

    report = await import_lines(target, lines, model_name=MODEL, dimensions=DIMENSIONS)

    assert (report.project_id, report.documents, report.chunks, report.embedded) == ("p", 2, 3, 0)
    assert (report.created, report.updated, report.unchanged) == (2, 0, 0)
    before = await source.embedded_documents("p", after=None, limit=10)
    after = await target.embedded_documents("p", after=None, limit=10)
    assert [(d.document_id, d.chunks, d.content_hash, d.created_at) for d, _ in after] == [
        (d.document_id, d.chunks, d.content_hash, d.created_at) for d, _ in before
    ]
    assert [[list(e.embedding) for e in c] for _, c in after] == [[list(e.embedding) for e in c] for _, c in before]
    assert await target.project_ids() == ["p"]


async def test_an_import_leaves_documents_with_the_exported_content_as_they_are_and_counts_each_kind() -> None:
    source, target = InMemoryDocumentStore(), InMemoryDocumentStore()
    await source.save_documents([entry("p", "same", 1), entry("p", "edited", 2), entry("p", "new", 1)])
    await target.save_documents([entry("p", "same", 1), entry("p", "edited", 1, content_hash="content-2")])
    kept_version = (await target.document_states([("p", "same")]))[("p", "same")].version
    target_outbox_before = len(await target.claim_outbox(limit=100))

    report = await import_lines(target, await exported(source, "p"), model_name=MODEL, dimensions=DIMENSIONS)

    assert (report.documents, report.created, report.updated, report.unchanged) == (3, 1, 1, 1)
    assert report.chunks == 3  # "edited" (2) and "new" (1); "same" is not written again
    states = await target.document_states([("p", "same"), ("p", "edited"), ("p", "new")])
    assert states[("p", "same")].version == kept_version
    assert states[("p", "edited")].content_hash == "content-1"
    assert ("p", "new") in states
    queued = await target.claim_outbox(limit=100)
    assert sorted(item.document_id for item in queued) == ["edited", "new"]
    assert target_outbox_before == 2


async def test_import_can_rename_the_project() -> None:
    source, target = InMemoryDocumentStore(), InMemoryDocumentStore()
    await source.save_documents([entry("p", "a", 1)])

    await import_lines(target, await exported(source, "p"), model_name=MODEL, dimensions=DIMENSIONS, project_id="q")

    document = await target.get_document("q", "a")
    assert document is not None
    assert document.chunks[0].project_id == "q"


async def test_an_import_into_a_project_id_the_api_cannot_address_is_refused() -> None:
    source, target = InMemoryDocumentStore(), InMemoryDocumentStore()
    await source.save_documents([entry("p", "a", 1)])
    lines = await exported(source, "p")

    with pytest.raises(InvalidInputError) as refused:
        await import_lines(target, lines, model_name=MODEL, dimensions=DIMENSIONS, project_id="bad name")

    assert refused.value.field == "project"
    assert await target.project_ids() == []


@pytest.mark.parametrize(
    ("header", "field"),
    [
        ({"format": "csv"}, "header"),
        ({"format": "poimen-export", "version": 9}, "version"),
        ({"format": "poimen-export", "version": 1, "embedding_model": "other", "dimensions": 384}, "embedding_model"),
        ({"format": "poimen-export", "version": 1, "embedding_model": MODEL, "dimensions": 3}, "embedding_model"),
    ],
)
async def test_a_foreign_or_mismatched_header_is_refused(header, field) -> None:
    with pytest.raises(InvalidInputError) as refused:
        await import_lines(InMemoryDocumentStore(), [json.dumps(header)], model_name=MODEL, dimensions=DIMENSIONS)

    assert refused.value.field == field


async def test_an_export_ends_with_a_line_counting_its_documents() -> None:
    source = InMemoryDocumentStore()
    await source.save_documents([entry("p", "a", 1), entry("p", "b", 2)])

    *_, end = await exported(source, "p")

    assert json.loads(end) == {"kind": "end", "documents": 2}


@pytest.mark.parametrize(
    ("cut", "message"),
    [
        (lambda lines: lines[:-1], "cut off: the file ends after 2 documents without its end line"),
        (lambda lines: [*lines[:2], lines[-1]], "line 3: the end line counts 2 documents, the file holds 1"),
        (lambda lines: [*lines, lines[1]], "line 4: lines follow the end line"),
        # "the end line counts '2' documents, the file holds 2"
        (lambda lines: [*lines[:-1], '{"kind": "end", "documents": "2"}'], "the end line's `documents` is '2', not a"),
        (lambda lines: lines[:1], "cut off: the file ends after 0 documents"),
    ],
)
async def test_an_export_cut_after_a_whole_line_or_miscounted_is_refused_and_writes_nothing(cut, message) -> None:
    source, target = InMemoryDocumentStore(), InMemoryDocumentStore()
    await source.save_documents([entry("p", "a", 1), entry("p", "b", 2)])
    lines = cut(await exported(source, "p"))

    with pytest.raises(InvalidInputError, match=message) as refused:
        check_export(lines, model_name=MODEL, dimensions=DIMENSIONS)

    assert refused.value.field == "end"
    assert await target.project_ids() == []


async def test_a_version_1_export_without_an_end_line_still_imports() -> None:
    source, target = InMemoryDocumentStore(), InMemoryDocumentStore()
    await source.save_documents([entry("p", "a", 1)])
    header, document, _ = await exported(source, "p")
    version_1 = [json.dumps({**json.loads(header), "version": 1}), document]

    report = await import_lines(target, version_1, model_name=MODEL, dimensions=DIMENSIONS)

    assert (report.documents, report.created) == (1, 1)


def _corrupt(line: str, change: object) -> str:
    record = json.loads(line)
    change(record)  # type: ignore[operator]
    return json.dumps(record)


def _unhashed(header: str) -> str:
    """`header` as an export from before record hashes wrote it: its lines are read unverified."""
    return _corrupt(header, lambda h: h.pop("record_hashes"))


def _nested(depth: int) -> dict:
    value: object = 1
    for _ in range(depth):
        value = [value]
    return {"nested": value}


def _move_chunks(record: dict, first_position: int) -> None:
    for offset, chunk in enumerate(record["chunks"]):
        chunk.update(position=first_position + offset, id=f"{record['id']}#{first_position + offset}")


def _set_first_embedding_value(record: dict, value: object) -> None:
    record["chunks"][0]["embedding"][0] = value


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda r: _set_first_embedding_value(r, float("nan")), r"not JSON \(NaN is no JSON number\)"),
        (lambda r: r["chunks"][0].update(embedding=[0.0] * 10), "the embedding is not 384 finite numbers"),
        (lambda r: r["chunks"][0].update(text="nul \x00 here"), "a text holds a NUL character"),
        (lambda r: r.update(metadata={"note": ["nul \x00"]}), "a text holds a NUL character"),
        (lambda r: r.update(tags=[1, None]), "the field 'tags' is a list holding a number, not a list of strings"),
        (lambda r: r.update(tags=["  "]), "a tag is not a string of 1 or more characters"),
        (lambda r: r.update(id="x" * 3000), "the id must be 1 to 256 characters"),
        (lambda r: r.update(chunks=[]), "has no chunks"),
        (
            lambda r: r["chunks"][0].update(embedding_model="other"),
            "was embedded with 'other', not the header's 'test-model'",
        ),
        (lambda r: r["chunks"][0].update(id="a#0"), "is not named '<document id>#0'"),
        (lambda r: r["chunks"][1].update(position=0, id="b#0"), "two chunks have the same position"),
        (lambda r: r["chunks"][0].update(text="edited after the export"), "its chunk_hash is not of its text"),
        (lambda r: r["chunks"][0].update(text="lone \ud800 surrogate"), "a lone surrogate"),
        (lambda r: r.update(title="lone \udfff"), "a lone surrogate"),
        (lambda r: r.update(metadata={"\ud800": 1}), "a lone surrogate"),
        # Each passed the check and failed the write in PostgreSQL, after the batches before it were written.
        (lambda r: r.update(metadata={"ratio": float("nan")}), "not JSON .*NaN"),
        (lambda r: r.update(metadata={"ratio": [float("-inf")]}), "not JSON .*-Infinity"),
        (lambda r: r.update(metadata=_nested(33)), "metadata nests deeper than 32"),
        (lambda r: _move_chunks(r, 2**31), r"'chunks\[0\].position' is 2147483648, not a position from 0 to 2\*\*31"),
        (lambda r: _move_chunks(r, -1), r"'chunks\[0\].position' is -1, not a position from 0"),
        (
            lambda r: r.update(event_time="0001-01-01T00:00:00+14:00"),
            "'event_time' is 0001-01-01T00:00:00.14:00, not a",
        ),
        (lambda r: r.update(created_at="9999-12-31T23:59:59-12:00"), "'created_at' is 9999-12-31T23:59:59-12:00, not"),
        (lambda r: r["chunks"][0].update(event_time="0001-01-01T00:00:00Z"), r"'chunks\[0\].event_time' is 0001-01"),
    ],
)
async def test_a_record_the_store_would_refuse_part_way_is_refused_before_anything_is_written(
    change: object, problem: str
) -> None:
    source = InMemoryDocumentStore()
    await source.save_documents([entry("p", "a", 1), entry("p", "b", 2)])
    header, first, second, end = await exported(source, "p")

    with pytest.raises(InvalidInputError, match=problem) as refused:
        check_export([header, first, _corrupt(second, change), end], model_name=MODEL, dimensions=DIMENSIONS)

    assert refused.value.field == "line 3"


async def test_a_document_twice_in_one_file_is_refused() -> None:
    source = InMemoryDocumentStore()
    await source.save_documents([entry("p", "a", 1)])
    header, document, _ = await exported(source, "p")

    with pytest.raises(InvalidInputError, match="appears twice in the file"):
        check_export(
            [header, document, document, '{"kind": "end", "documents": 2}'], model_name=MODEL, dimensions=DIMENSIONS
        )


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda r: r.pop("created_at"), "the field 'created_at' is missing"),
        (lambda r: r.update(tags=5), "the field 'tags' is a number, not a list of strings"),
        # was "a field holds the wrong kind of value (a number or a list where a string or list belongs?)"
        (lambda r: r.update(event_time="yesterday"), "a value cannot be read .*'yesterday'"),
    ],
)
async def test_a_record_that_is_not_one_is_named_in_the_export_formats_words(change: object, reason: str) -> None:
    # Was "(KeyError: 'created_at')" and "(TypeError: 'int' object is not iterable)".
    source = InMemoryDocumentStore()
    await source.save_documents([entry("p", "a", 1)])
    header, document, end = await exported(source, "p")

    with pytest.raises(InvalidInputError, match=f"line 2: not a document record: {reason}") as refused:
        check_export([header, _corrupt(document, change), end], model_name=MODEL, dimensions=DIMENSIONS)

    assert "Error" not in refused.value.message


async def test_a_line_that_is_not_json_says_where() -> None:
    source = InMemoryDocumentStore()
    await source.save_documents([entry("p", "a", 1)])
    header, _, end = await exported(source, "p")

    with pytest.raises(InvalidInputError, match=r"line 2: not a document record: not JSON \(.* at column 2\)"):
        check_export([header, "{oops", end], model_name=MODEL, dimensions=DIMENSIONS)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        # Each was converted and written: tags "abc" became the tags a, b and c, a null title the title "None".
        (lambda r: r.update(tags="abc"), "the field 'tags' is a string, not a list of strings"),
        (lambda r: r.update(title=None), "the field 'title' is null, not a string"),
        (lambda r: r.update(source=7), "the field 'source' is a number, not a string"),
        (lambda r: r.update(metadata=[["k", 1]]), "the field 'metadata' is a list, not an object"),
        (lambda r: r.update(metadata=""), "the field 'metadata' is a string, not an object"),
        (lambda r: r.update(event_time=1700000000), "the field 'event_time' is a number, not a string or null"),
        (
            lambda r: r["chunks"][0].update(position=0.0),
            r"the field 'chunks\[0\].position' is a number, not an integer",
        ),
        (
            lambda r: r["chunks"][0].update(position=False),
            r"the field 'chunks\[0\].position' is a boolean, not an integer",
        ),
        (
            lambda r: r["chunks"][0].update(tags="ab"),
            r"the field 'chunks\[0\].tags' is a string, not a list of strings",
        ),
        # Was a TypeError out of the record check: a traceback, not a refusal.
        (
            lambda r: r["chunks"][0].update(breadcrumb=[1]),
            r"the field 'chunks\[0\].breadcrumb' is a list holding a number, not a",
        ),
        (
            lambda r: r["chunks"][0].update(embedding_model=None),
            r"the field 'chunks\[0\].embedding_model' is null, not a string",
        ),
        (
            lambda r: r["chunks"][0].update(embedding=[str(v) for v in r["chunks"][0]["embedding"]]),
            r"the field 'chunks\[0\].embedding' is a list holding a string, not a list of numbers",
        ),
        (lambda r: r.update(chunks={"0": {}}), "the field 'chunks' is an object, not a list of objects"),
        (lambda r: r.update(version="7"), "the field 'version' is a string, not an integer"),
        (lambda r: r.update(version=-1), "a value cannot be read .*'version' is -1, not a version from 0"),
    ],
)
async def test_a_field_of_another_json_type_is_refused_not_converted(change: object, reason: str) -> None:
    source = InMemoryDocumentStore()
    await source.save_documents([entry("p", "a", 1)])
    header, document, end = await exported(source, "p")

    with pytest.raises(InvalidInputError, match=f"line 2: not a document record: {reason}") as refused:
        check_export([header, _corrupt(document, change), end], model_name=MODEL, dimensions=DIMENSIONS)

    assert refused.value.field == "line 2"


async def test_an_imported_document_gets_at_least_its_exported_version() -> None:
    # Counted from 1 again, a version read before the move (an If-Match) named other content after it.
    source, target = InMemoryDocumentStore(), InMemoryDocumentStore()
    for number in range(3):
        await source.save_documents([entry("p", "edited", 1, content_hash=f"content-{number}")])
    await source.save_documents([entry("p", "new", 1)])
    exported_states = await source.document_states([("p", "edited"), ("p", "new")])

    await import_lines(target, await exported(source, "p"), model_name=MODEL, dimensions=DIMENSIONS)
    imported_states = await target.document_states([("p", "edited"), ("p", "new")])
    later = await target.save_documents([entry("p", "edited", 1, content_hash="written after the move")])

    assert imported_states == exported_states
    assert later["p", "edited"] > max(state.version for state in exported_states.values())


async def test_an_export_without_versions_still_imports() -> None:
    source, target = InMemoryDocumentStore(), InMemoryDocumentStore()
    await source.save_documents([entry("p", "a", 1)])
    header, document, end = await exported(source, "p")
    from_before = [_unhashed(header), _corrupt(document, lambda r: r.pop("version")), end]  # versions came first

    await import_lines(target, from_before, model_name=MODEL, dimensions=DIMENSIONS)

    assert (await target.document_states([("p", "a")]))["p", "a"].version == 1


def long_entry(project_id: str, document_id: str, n_chunks: int) -> tuple[StoredDocument, list[EmbeddedChunk]]:
    """`entry` with more chunks than dimensions: chunk i points along axis i modulo the dimension."""
    document, embedded = entry(project_id, document_id, n_chunks)
    axes = [[0.0] * DIMENSIONS for _ in embedded]
    for position, axis in enumerate(axes):
        axis[position % DIMENSIONS] = 1.0
    return document, [replace(item, embedding=axis) for item, axis in zip(embedded, axes, strict=True)]


class CountingStore(InMemoryDocumentStore):
    """An in-memory store that records how many chunks each export page and each import write held."""

    def __init__(self) -> None:
        super().__init__()
        self.page_chunks: list[list[int]] = []

    async def embedded_documents(
        self, project_id: str, *, after: str | None, limit: int
    ) -> list[tuple[StoredDocument, list[EmbeddedChunk]]]:
        page = await super().embedded_documents(project_id, after=after, limit=limit)
        self.page_chunks.append([len(chunks) for _, chunks in page])
        return page

    async def save_documents(self, documents, **kwargs):  # type: ignore[no-untyped-def]
        self.page_chunks.append([len(chunks) for _, chunks in documents])
        return await super().save_documents(documents, **kwargs)


async def test_export_and_import_pages_hold_at_most_the_chunk_budget_unless_one_document_is_larger() -> None:
    source, target = CountingStore(), CountingStore()
    sizes = [900, 900, 900, 2_500, 10, 1_000, 1_000, 1]
    await source.save_documents([long_entry("p", f"d{number}", size) for number, size in enumerate(sizes)])
    source.page_chunks.clear()

    lines = await exported(source, "p")
    report = await import_lines(target, lines, model_name=MODEL, dimensions=DIMENSIONS)

    pages = [page for page in source.page_chunks if page]
    assert pages == [[900, 900], [900], [2_500], [10, 1_000], [1_000, 1]]  # 200 documents a page before
    assert target.page_chunks == pages  # an import writes in the same bounds
    assert (report.documents, report.chunks) == (len(sizes), sum(sizes))


async def test_a_time_without_an_offset_is_imported_as_utc_as_the_api_takes_it() -> None:
    # It reached PostgreSQL's driver naive, which sends a naive time in the machine's local time zone.
    source, target = InMemoryDocumentStore(), InMemoryDocumentStore()
    await source.save_documents([entry("p", "a", 1)])
    header, document, end = await exported(source, "p")
    naive = _corrupt(document, lambda r: r.update(event_time="2024-05-08T12:00:00", created_at="2024-05-01T08:00:00"))

    # A file written by other means than `poimen export`, so without record hashes.
    await import_lines(target, [_unhashed(header), naive, end], model_name=MODEL, dimensions=DIMENSIONS)

    stored = await target.get_document("p", "a")
    assert stored is not None
    assert stored.event_time == datetime(2024, 5, 8, 12, tzinfo=UTC)
    assert stored.created_at == datetime(2024, 5, 1, 8, tzinfo=UTC)


async def test_a_record_without_a_creation_time_names_its_line() -> None:
    # Was "document 'a' has no created_at/updated_at" for the field "created_at": no line named.
    source = InMemoryDocumentStore()
    await source.save_documents([entry("p", "a", 1)])
    header, document, end = await exported(source, "p")

    with pytest.raises(InvalidInputError, match=r"line 2: .*the field 'updated_at' is null, not a string") as refused:
        check_export(
            [header, _corrupt(document, lambda r: r.update(updated_at=None)), end],
            model_name=MODEL,
            dimensions=DIMENSIONS,
        )

    assert refused.value.field == "line 2"


async def test_a_line_nested_too_deeply_to_read_is_refused_not_a_traceback() -> None:
    # Python's JSON reader raised RecursionError: a traceback, exit 1, instead of a refusal naming the line.
    source = InMemoryDocumentStore()
    await source.save_documents([entry("p", "a", 1)])
    header, document, end = await exported(source, "p")
    nested = document.replace('"metadata": {', '"metadata": {"deep": ' + "[" * 100_000 + "]" * 100_000 + ", ", 1)

    with pytest.raises(InvalidInputError, match=r"line 2: not a document record: not JSON .*nested") as refused:
        check_export([header, nested, end], model_name=MODEL, dimensions=DIMENSIONS)

    assert refused.value.field == "line 2"


@pytest.mark.parametrize(
    ("field", "number"), [("metadata", "1e999"), ("embedding", "1e999"), ("embedding", "1" + "0" * 400)]
)
async def test_a_number_past_the_range_of_a_double_is_refused(field: str, number: str) -> None:
    # 1e999 is JSON, but reads as infinity: in metadata the write to JSONB failed after the batches before it.
    # An integer of 400 digits in an embedding was an OverflowError out of the check: a traceback, exit 1.
    source = InMemoryDocumentStore()
    await source.save_documents([entry("p", "a", 1)])
    header, document, end = await exported(source, "p")
    record = json.loads(document)
    if field == "metadata":
        record["metadata"] = {"big": "HUGE"}
    else:
        record["chunks"][0]["embedding"][0] = "HUGE"
    huge = json.dumps(record).replace('"HUGE"', number)

    with pytest.raises(InvalidInputError, match=r"past the range of a double|not 384 finite numbers") as refused:
        check_export([header, huge, end], model_name=MODEL, dimensions=DIMENSIONS)

    assert refused.value.field == "line 2"


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda h: h.pop("project"), "the header names no project"),  # was a KeyError traceback
        (lambda h: h.update(project=123), "the header's project is a number, not a string"),  # was written to "123"
    ],
)
async def test_a_header_that_names_no_project_as_a_string_is_refused(change: object, reason: str) -> None:
    source, target = InMemoryDocumentStore(), InMemoryDocumentStore()
    await source.save_documents([entry("p", "a", 1)])
    header, document, end = await exported(source, "p")

    with pytest.raises(InvalidInputError, match=reason) as refused:
        await import_lines(target, [_corrupt(header, change), document, end], model_name=MODEL, dimensions=DIMENSIONS)

    assert refused.value.field == "project"
    assert await target.project_ids() == []


async def test_a_file_cut_inside_its_last_line_says_it_is_cut_off() -> None:
    # Was "line 3: not a document record: not JSON (Unterminated string ...)": read as a corrupted line.
    source = InMemoryDocumentStore()
    await source.save_documents([entry("p", "a", 1), entry("p", "b", 1)])
    header, first, second, _ = await exported(source, "p")
    lines = [header + "\n", first + "\n", second[: len(second) // 2]]

    with pytest.raises(InvalidInputError, match=r"line 3: the file ends inside this line: cut off") as refused:
        check_export(lines, model_name=MODEL, dimensions=DIMENSIONS)

    assert refused.value.field == "line 3"


async def test_a_refused_line_is_named_by_its_number_in_the_file_blank_lines_counted() -> None:
    # Blank lines are skipped, and were not counted: the line named was not the one to look at.
    source = InMemoryDocumentStore()
    await source.save_documents([entry("p", "a", 1)])
    header, _, end = await exported(source, "p")

    with pytest.raises(InvalidInputError, match=r"^line 4: not a document record: not JSON") as refused:
        check_export([header + "\n", "\n", "   \n", "{oops\n", end + "\n"], model_name=MODEL, dimensions=DIMENSIONS)

    assert refused.value.field == "line 4"
