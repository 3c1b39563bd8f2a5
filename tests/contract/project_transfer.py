"""`ProjectTransferContract`: export and import (`app.ingestion.transfer`) over every `DocumentStore`.

A mixin like `DocumentStoreContract` (no Test prefix); the test classes of `test_document_stores.py` run it.
The projects here hold more than one page (`PAGE_SIZE`) of documents: what goes wrong goes wrong between pages.
"""

from __future__ import annotations

import json

from app.ingestion.transfer import PAGE_SIZE, export_lines
from tests.contract.document_store import DIMENSIONS, MODEL, entry

PAGES_OF_DOCUMENTS = 2 * PAGE_SIZE + 50


def document_ids(count: int) -> list[str]:
    return [f"d{number:04}" for number in range(count)]


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
