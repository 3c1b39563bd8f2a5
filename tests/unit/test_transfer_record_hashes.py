"""An export line's `record_hash`: an import refuses a line edited since the export, whose content hash lies."""

from __future__ import annotations

import json

import pytest

from app.domain.errors import InvalidInputError
from app.domain.models import Chunk
from app.engines.memory import InMemoryDocumentStore
from app.ingestion.content_hashes import chunk_hash, embedding_text
from app.ingestion.record_hashes import record_hash
from app.ingestion.transfer import check_export, import_lines
from tests.unit.test_transfer import DIMENSIONS, MODEL, _corrupt, _unhashed, entry, exported


def _edit_text(record: dict) -> None:
    """A chunk's text edited with its `chunk_hash` recomputed, so every other check passes."""
    chunk = record["chunks"][0]
    chunk["text"] = "edited after the export"
    edited = Chunk(
        chunk_id=chunk["id"],
        document_id=record["id"],
        project_id="p",
        text=chunk["text"],
        source=chunk["source"],
        level=chunk["level"],
        breadcrumb=tuple(chunk["breadcrumb"]),
        section_title=chunk["section_title"],
        position=chunk["position"],
        context=chunk["context"],
    )
    chunk["chunk_hash"] = chunk_hash(embedding_text(edited))


def _rehashed(line: str) -> str:
    """`line` with its `record_hash` made again: what one who edits a file on purpose can do."""
    record = json.loads(line)
    return json.dumps(record | {"record_hash": record_hash(record)})


@pytest.mark.parametrize(
    "change",
    [
        _edit_text,
        lambda r: r.update(title="an edited title"),
        lambda r: r.update(metadata={"owner": "someone else"}),
        lambda r: r.update(content_hash="0" * 64),
        lambda r: r["chunks"][0]["embedding"].__setitem__(0, 0.5),
        lambda r: r.update(version=r["version"] + 1),
    ],
    ids=["chunk text and chunk_hash", "title", "metadata", "content_hash", "embedding", "version"],
)
async def test_a_line_edited_since_the_export_is_refused_naming_its_line(change: object) -> None:
    # Each was imported under the exported content hash: a later ingest of the real document (same hash)
    # said "unchanged" and left the edit stored, and an edited chunk text kept the old text's vector.
    source = InMemoryDocumentStore()
    await source.save_documents([entry("p", "a", 1), entry("p", "b", 2)])
    header, first, second, end = await exported(source, "p")

    with pytest.raises(InvalidInputError, match=r"^line 3: document 'b': the line was changed after") as refused:
        check_export([header, first, _corrupt(second, change), end], model_name=MODEL, dimensions=DIMENSIONS)

    assert refused.value.field == "line 3"


async def test_a_file_from_before_record_hashes_is_read_unverified_edits_and_all() -> None:
    # What every import did: the edited text stored under the exported content hash, which a later ingest of
    # the real document compares equal ("unchanged"), so the edit stays.
    source, target = InMemoryDocumentStore(), InMemoryDocumentStore()
    await source.save_documents([entry("p", "a", 1)])
    header, document, end = await exported(source, "p")

    await import_lines(
        target, [_unhashed(header), _corrupt(document, _edit_text), end], model_name=MODEL, dimensions=DIMENSIONS
    )

    stored = await target.get_document("p", "a")
    assert stored is not None
    assert stored.chunks[0].text == "edited after the export"
    assert stored.content_hash == json.loads(document)["content_hash"]


async def test_a_line_reformatted_or_with_its_keys_reordered_keeps_its_record_hash() -> None:
    source, target = InMemoryDocumentStore(), InMemoryDocumentStore()
    await source.save_documents([entry("p", "a", 2)])
    header, document, end = await exported(source, "p")
    reformatted = json.dumps(json.loads(document), sort_keys=True, separators=(" , ", " : "))

    report = await import_lines(target, [header, reformatted, end], model_name=MODEL, dimensions=DIMENSIONS)

    assert (report.documents, report.created) == (1, 1)


async def test_a_line_rehashed_after_an_edit_on_purpose_is_taken_as_it_says() -> None:
    # Not a signature: whoever recomputes the hash vouches for the line, as for a chunk_hash.
    source, target = InMemoryDocumentStore(), InMemoryDocumentStore()
    await source.save_documents([entry("p", "a", 1)])
    header, document, end = await exported(source, "p")

    edited = _rehashed(_corrupt(document, lambda r: r.update(title="retitled")))
    await import_lines(target, [header, edited, end], model_name=MODEL, dimensions=DIMENSIONS)

    stored = await target.get_document("p", "a")
    assert stored is not None
    assert stored.title == "retitled"


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda r: r.pop("record_hash"), "the field 'record_hash' is missing"),
        (lambda r: r.update(record_hash=7), "the field 'record_hash' is not a string"),
    ],
)
async def test_a_line_without_a_record_hash_in_a_file_whose_header_promises_one_is_refused(
    change: object, problem: str
) -> None:
    source = InMemoryDocumentStore()
    await source.save_documents([entry("p", "a", 1)])
    header, document, end = await exported(source, "p")

    with pytest.raises(InvalidInputError, match=f"line 2: document 'a': {problem}"):
        check_export([header, _corrupt(document, change), end], model_name=MODEL, dimensions=DIMENSIONS)


async def test_a_header_naming_another_record_hash_is_refused() -> None:
    source = InMemoryDocumentStore()
    await source.save_documents([entry("p", "a", 1)])
    header, document, end = await exported(source, "p")

    with pytest.raises(InvalidInputError, match="record_hashes is 'md5'; this service reads 'sha256'") as refused:
        check_export(
            [_corrupt(header, lambda h: h.update(record_hashes="md5")), document, end],
            model_name=MODEL,
            dimensions=DIMENSIONS,
        )

    assert refused.value.field == "record_hashes"


async def test_every_exported_line_carries_the_hash_of_its_content_and_the_header_says_so() -> None:
    source = InMemoryDocumentStore()
    await source.save_documents([entry("p", "a", 1), entry("p", "b", 3)])
    header, *documents, _ = await exported(source, "p")

    assert json.loads(header)["record_hashes"] == "sha256"
    assert json.loads(header)["version"] == 2  # readers from before record hashes skip the field
    assert [json.loads(line)["record_hash"] for line in documents] == [
        record_hash(json.loads(line)) for line in documents
    ]
    assert len({json.loads(line)["record_hash"] for line in documents}) == 2
