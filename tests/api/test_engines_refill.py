"""An index-format upgrade empties the embedded lexical index; the start-up refills it from PostgreSQL's truth."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from app.domain.errors import EngineUnavailableError
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


async def test_a_start_that_stopped_before_queueing_the_refill_queues_it_at_the_next_start(tmp_path) -> None:
    # A start killed (OOM, a probe, a deploy) after the older folder was emptied and the new version written,
    # before every project was queued: the next start found a current, empty folder and queued nothing, so
    # the lexical leg answered nothing for those projects while the store counted every chunk indexed.
    store = InMemoryDocumentStore()
    await store.save_documents([entry("alpha", "a", 1), entry("alpha", "b", 1), entry("beta", "c", 1)])
    await store.complete_outbox(await store.claim_outbox(limit=10))
    write_older_schema_index(tmp_path / "lexical")
    await TantivyLexicalIndex(tmp_path / "lexical").close()  # emptied, then the process died

    lexical = TantivyLexicalIndex(tmp_path / "lexical")
    assert lexical.recreated
    assert await refill_recreated_lexical_index(lexical, store) == 2
    assert (await store.outbox_stats()).backlog == 3
    await lexical.close()

    await store.complete_outbox(await store.claim_outbox(limit=10))
    lexical = TantivyLexicalIndex(tmp_path / "lexical")  # the refill was queued: owed no more
    assert not lexical.recreated
    assert await refill_recreated_lexical_index(lexical, store) == 0
    assert (await store.outbox_stats()).backlog == 0
    await lexical.close()


class _QueueFailsOnce(InMemoryDocumentStore):
    def __init__(self, failing_project: str) -> None:
        super().__init__()
        self._failing_project: str | None = failing_project

    async def queue_project_for_reindex(self, project_id: str) -> int:
        if project_id == self._failing_project:
            self._failing_project = None
            raise EngineUnavailableError("down", engine="memory")
        return await super().queue_project_for_reindex(project_id)


async def test_a_refill_that_failed_midway_is_queued_again_at_the_next_start(tmp_path) -> None:
    store = _QueueFailsOnce("beta")
    await store.save_documents([entry("alpha", "a", 1), entry("beta", "c", 1)])
    await store.complete_outbox(await store.claim_outbox(limit=10))
    write_older_schema_index(tmp_path / "lexical")
    lexical = TantivyLexicalIndex(tmp_path / "lexical")
    with pytest.raises(EngineUnavailableError):
        await refill_recreated_lexical_index(lexical, store)  # alpha queued, beta not: the start fails
    await lexical.close()

    lexical = TantivyLexicalIndex(tmp_path / "lexical")
    assert await refill_recreated_lexical_index(lexical, store) == 2
    assert {item.project_id for item in await store.claim_outbox(limit=10)} == {"alpha", "beta"}
    await lexical.close()
