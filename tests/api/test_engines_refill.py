"""An index-format upgrade empties the embedded lexical index; the start-up refills it from PostgreSQL's truth."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.engines.memory import InMemoryDocumentStore
from app.engines.tantivy_index import TantivyLexicalIndex
from app.wiring.engines import refill_recreated_lexical_index
from tests.contract.document_store import entry
from tests.contract.tantivy_layouts import V1_TEXT_FIELDS, write_poimen_index

if TYPE_CHECKING:
    from pathlib import Path


def write_older_schema_index(path: Path) -> None:
    write_poimen_index(path, V1_TEXT_FIELDS, version=None)


async def test_a_recreated_index_queues_every_project_again(tmp_path) -> None:
    store = InMemoryDocumentStore()
    await store.save_documents([entry("alpha", "a", 1), entry("alpha", "b", 1), entry("beta", "c", 1)])
    await store.complete_outbox(await store.claim_outbox(limit=10))
    write_older_schema_index(tmp_path / "lexical")
    lexical = TantivyLexicalIndex(tmp_path / "lexical")

    projects = await refill_recreated_lexical_index(lexical, store)

    assert lexical.recreated
    assert projects == 2
    assert (await store.outbox_stats()).backlog == 3
    await lexical.close()


async def test_an_index_of_the_current_format_queues_nothing(tmp_path) -> None:
    store = InMemoryDocumentStore()
    await store.save_documents([entry("alpha", "a", 1)])
    await store.complete_outbox(await store.claim_outbox(limit=10))
    lexical = TantivyLexicalIndex(tmp_path / "lexical")

    assert await refill_recreated_lexical_index(lexical, store) == 0
    assert (await store.outbox_stats()).backlog == 0
    await lexical.close()
