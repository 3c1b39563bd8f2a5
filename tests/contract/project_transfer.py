"""`ProjectTransferContract`: export and import (`app.ingestion.transfer`) over every `DocumentStore`.

A mixin like `DocumentStoreContract` (no Test prefix); the test classes of `test_document_stores.py` run it.
The projects here hold more than one page (`PAGE_SIZE`) of documents: what goes wrong goes wrong between pages.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import TYPE_CHECKING

import pytest

from app.domain.catalog import DocumentSelection
from app.domain.document_versions import RestoreFloor
from app.domain.errors import DocumentNotFoundError
from app.domain.models import EmbeddedChunk
from app.ingestion.content_hashes import chunk_hash, embedding_text
from app.ingestion.transfer import PAGE_SIZE, export_lines, import_lines
from tests.contract.document_store import DIMENSIONS, MODEL, entry

if TYPE_CHECKING:
    from app.domain.models import StoredDocument
    from app.domain.ports import DocumentStore

PAGES_OF_DOCUMENTS = 2 * PAGE_SIZE + 50


def document_ids(count: int) -> list[str]:
    return [f"d{number:04}" for number in range(count)]


def importable(project_id: str, document_id: str, **kwargs: str) -> tuple[StoredDocument, list[EmbeddedChunk]]:
    """The contract suite's one-chunk document, its chunk hashed as ingest hashes it (an import checks the hash)."""
    document, [item] = entry(project_id, document_id, 1, **kwargs)
    hashed = replace(item.chunk, chunk_hash=chunk_hash(embedding_text(item.chunk)))
    return replace(document, chunks=(hashed,)), [EmbeddedChunk(hashed, item.embedding, item.embedding_model)]


def versioned(project_id: str, document_id: str, version: int) -> tuple[StoredDocument, list[EmbeddedChunk]]:
    """An imported document: it carries its exported version."""
    document, embedded = importable(project_id, document_id)
    return replace(document, version=version), embedded


async def exported(store: DocumentStore, project_id: str) -> list[str]:
    return [line async for line in export_lines(store, project_id, model_name=MODEL, dimensions=DIMENSIONS)]


class ProjectTransferContract:
    async def test_an_export_is_the_project_at_one_moment_whatever_is_written_meanwhile(self, store, project) -> None:
        ids = document_ids(PAGES_OF_DOCUMENTS)
        await store.save_documents([entry(project, document_id, 1) for document_id in ids])
        lines = export_lines(store, project, model_name=MODEL, dimensions=DIMENSIONS)
        exported = [await anext(lines), await anext(lines)]  # the header and the first page's first document

        # Another writer, between pages: one document created before the export's place, one deleted after it.
        await store.save_documents([entry(project, "a-created", 1)])
        assert await store.delete_document(project, ids[-1])
        exported += [line async for line in lines]

        records = [json.loads(line) for line in exported]
        # As the project stood when the export began: the deleted document in, the created one out.
        assert [record["id"] for record in records[1:-1]] == ids
        assert records[-1] == {"kind": "end", "documents": PAGES_OF_DOCUMENTS}

    async def test_a_round_trip_of_more_than_a_page_through_an_empty_project_is_byte_identical(
        self, store, project
    ) -> None:
        ids = document_ids(PAGES_OF_DOCUMENTS)
        await store.save_documents([importable(project, document_id) for document_id in ids])  # one version for all
        await store.save_documents([importable(project, ids[0], content_hash="content-2")])  # and one past it
        first = await exported(store, project)

        copy = f"{project}_copy"
        report = await import_lines(store, first, project_id=copy, model_name=MODEL, dimensions=DIMENSIONS)
        second = await exported(store, copy)

        assert report.created == PAGES_OF_DOCUMENTS
        assert json.loads(second[0]) == {**json.loads(first[0]), "project": copy}
        # The versions included: the documents after the first page got one past the first page's highest.
        assert [json.loads(line).get("version") for line in second[1:]] == [
            json.loads(line).get("version") for line in first[1:]
        ]
        assert second[1:] == first[1:]

    async def test_saves_restoring_one_import_count_from_the_generation_before_it(self, store, project) -> None:
        start = await store.project_generation(project)
        floor = RestoreFloor(project_id=project, before=start, left=start)
        first = await store.save_documents([versioned(project, "a", start + 5)], restoring=floor)

        floor = replace(floor, left=first.generations[project])
        second = await store.save_documents([versioned(project, "b", start + 2)], restoring=floor)

        assert (first[project, "a"], second[project, "b"]) == (start + 5, start + 2)
        assert second.generations[project] == await store.project_generation(project) > start + 5

    async def test_a_save_restoring_an_import_after_another_write_counts_past_the_generation(
        self, store, project
    ) -> None:
        start = await store.project_generation(project)
        floor = RestoreFloor(project_id=project, before=start, left=start)
        first = await store.save_documents([versioned(project, "a", start + 5)], restoring=floor)
        # Another writer between the import's saves: "b" had versions the import's one may not take again.
        await store.save_documents([importable(project, "b")])
        assert await store.delete_document(project, "b")
        generation = await store.project_generation(project)

        floor = replace(floor, left=first.generations[project])
        second = await store.save_documents([versioned(project, "b", start + 2)], restoring=floor)

        assert second[project, "b"] == generation + 1

    async def test_an_export_of_a_project_deleted_as_it_begins_is_refused_not_an_empty_file(
        self, store, project
    ) -> None:
        # `poimen export` checks that the project holds documents, then exports: a delete of the project in
        # between gave a header and an end line counting 0, exit 0: an empty backup taken for a good one.
        await store.save_documents([entry(project, document_id, 1) for document_id in document_ids(3)])
        lines = export_lines(store, project, model_name=MODEL, dimensions=DIMENSIONS)
        assert await store.delete_documents(DocumentSelection(project_id=project)) == 3

        with pytest.raises(DocumentNotFoundError, match="holds no documents"):
            await anext(lines)  # not even the header: nothing reaches the file or standard output
