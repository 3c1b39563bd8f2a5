"""The document-store contract on the in-memory fake and on real PostgreSQL."""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import replace
from typing import TYPE_CHECKING

import pytest
from sqlalchemy import text

from app.domain.errors import EngineError, EngineUnavailableError
from app.domain.models import DocumentChunks, EmbeddedChunk
from app.engines.memory import InMemoryDocumentStore
from app.engines.postgres import PostgresDocumentStore
from app.engines.postgres_scope import project_transaction
from app.ingestion.outbox import OutboxWorker
from app.ingestion.transfer import export_lines
from tests.contract.document_catalog import DocumentCatalogContract
from tests.contract.document_store import (
    DIMENSIONS,
    MODEL,
    DocumentStoreContract,
    chunk,
    claimed,
    document,
    embedding,
    entry,
)
from tests.contract.project_transfer import ProjectTransferContract

if TYPE_CHECKING:
    from collections.abc import Sequence


class CountingLexicalIndex:
    """A lexical index that only counts which documents it was asked to index, and by which task."""

    name = "counting"

    def __init__(self) -> None:
        self.indexed: list[tuple[str, str]] = []
        self.batches_by_worker_task: Counter[str] = Counter()

    async def replace_documents(self, documents: Sequence[DocumentChunks]) -> None:
        task = asyncio.current_task()
        self.batches_by_worker_task[task.get_name() if task else "none"] += 1
        await asyncio.sleep(0.01)  # a write takes time: the other worker claims meanwhile
        self.indexed.extend((document.project_id, document.document_id) for document in documents)


class TestInMemoryDocumentStore(DocumentStoreContract, DocumentCatalogContract, ProjectTransferContract):
    @pytest.fixture
    def store(self):
        return InMemoryDocumentStore()

    async def test_unavailable_fake_raises(self, store) -> None:
        store.available = False

        with pytest.raises(EngineUnavailableError):
            await store.ping()


@pytest.mark.integration
class TestPostgresDocumentStore(DocumentStoreContract, DocumentCatalogContract, ProjectTransferContract):
    @pytest.fixture
    def store(self, postgres_engine):
        return PostgresDocumentStore(postgres_engine)

    async def test_an_export_closed_part_way_holds_no_connection_or_transaction(
        self, store, project, postgres_engine
    ) -> None:
        await store.save_documents([entry(project, f"d{number}", 1) for number in range(3)])
        lines = export_lines(store, project, model_name=MODEL, dimensions=DIMENSIONS)
        await anext(lines), await anext(lines)  # the header and the first document: the snapshot is open
        held = postgres_engine.pool.checkedout()

        await lines.aclose()  # what `poimen export` does when its reader goes away (a closed pipe)

        assert (held, postgres_engine.pool.checkedout()) == (1, 0)

    async def test_failed_batch_writes_nothing(self, store, project) -> None:
        bad = chunk(project, "bad", 0)
        batch = [entry(project, "good", 2), (document(project, "bad", [bad]), [EmbeddedChunk(bad, [1.0, 0.0], "m")])]

        with pytest.raises(EngineError) as error:
            await store.save_documents(batch)

        assert error.value.engine == "postgres"
        assert await store.get_document(project, "good") is None

    async def test_a_replica_of_the_release_before_0010_writes_past_every_version_this_release_gave(
        self, store, project, postgres_engine
    ) -> None:
        # A rolling update across migration 0010 (old replicas serve until replaced) and a rollback after it
        # run the release before, which gives a write `nextval('document_version_seq')`. This release counts
        # versions per project and left the sequence behind them: an old replica replacing a document a new
        # one wrote three times gave it "11" after "14", the version of content a stale If-Match "11" then
        # overwrote unseen (scripts/probe_rolling_update.py; docs/operations.md, "Rolling updates").
        async with project_transaction(postgres_engine, [project]) as connection:
            sequence = "SELECT coalesce(pg_sequence_last_value('document_version_seq'), 0)"
            behind = (await connection.execute(text(sequence))).scalar_one()
        stored, chunks = entry(project, "doc", 1)
        for number in range(3):
            versioned = replace(stored, version=behind + 50, content_hash=f"content-{number}")
            given = (await store.save_documents([(versioned, chunks)]))[project, "doc"]
        # The release before's replace and create, as its `UPSERT_DOCUMENT` and the column default run them.
        old_replace = (
            "UPDATE documents SET version = nextval('document_version_seq') "
            "WHERE project_id = :p AND document_id = 'doc' RETURNING version"
        )
        old_create = (
            "INSERT INTO documents (project_id, document_id, source, title, content_hash) "
            "VALUES (:p, 'other', 's', 't', 'h') RETURNING version"
        )
        async with project_transaction(postgres_engine, [project], write=True) as connection:
            replaced = (await connection.execute(text(old_replace), {"p": project})).scalar_one()
            created = (await connection.execute(text(old_create), {"p": project})).scalar_one()

        assert given == behind + 52
        assert replaced > given
        assert created > replaced

    async def test_chunks_are_marked_indexed_only_on_completion(self, store, project, postgres_engine) -> None:
        await store.save_documents([entry(project, "doc", 2)])
        flags = "SELECT bool_and(lexically_indexed) FROM chunks WHERE project_id = :p"
        async with project_transaction(postgres_engine, [project]) as connection:
            before = (await connection.execute(text(flags), {"p": project})).scalar_one()
        await store.complete_outbox([d for d in await store.claim_outbox(limit=100_000) if d.project_id == project])

        async with project_transaction(postgres_engine, [project]) as connection:
            after = (await connection.execute(text(flags), {"p": project})).scalar_one()
        assert (before, after) == (False, True)

    async def test_two_workers_draining_one_outbox_index_each_entry_once(self, postgres_engine, project) -> None:
        writer = PostgresDocumentStore(postgres_engine)
        await writer.save_documents([entry(project, f"d{n}", 1) for n in range(60)])
        lexical = CountingLexicalIndex()
        workers = [
            OutboxWorker(
                store=PostgresDocumentStore(postgres_engine),  # as two processes would: one store each
                lexical=lexical,
                batch_size=7,
                poll_interval_s=0.01,
                max_backoff_s=0.1,
            )
            for _ in range(2)
        ]

        await asyncio.gather(*(worker.drain(30.0) for worker in workers))

        ours = Counter(key for key in lexical.indexed if key[0] == project)
        assert sorted(ours) == sorted((project, f"d{n}") for n in range(60))
        assert set(ours.values()) == {1}
        assert len(lexical.batches_by_worker_task) == 2  # both workers took a share

    async def test_more_writers_of_distinct_documents_than_the_pool_has_connections_all_write(
        self, store, project, postgres_engine
    ) -> None:
        # Each block holds its lock's connection and takes a second one for the reads and the write inside:
        # with as many blocks as connections, every block waited for a second one until the pool's timeout.
        writers = 3 * postgres_engine.pool.size()
        failures: list[str] = []

        async def writer(number: int) -> None:
            key = (project, f"w{number}")
            try:
                async with store.lock_documents([key]):
                    assert await store.document_states([key]) == {}
                    await store.save_documents([entry(project, key[1], 1)])
            except EngineError as error:
                failures.append(error.message)

        await asyncio.gather(*(writer(number) for number in range(writers)))

        assert failures == []
        stored = await store.document_states([(project, f"w{number}") for number in range(writers)])
        assert len(stored) == writers

    async def test_writes_completions_and_reindexes_of_one_project_never_deadlock(self, store, project) -> None:
        # They take chunks, outbox rows and the generation row in different orders; the project lock
        # taken first makes them queue instead (found by fuzzing: two ingests of one document, 40P01).
        failures: list[str] = []

        async def writer(number: int) -> None:
            for step in range(20):
                try:
                    async with store.lock_documents([(project, "doc")]):
                        size = 1 + (number + step) % 3
                        await store.save_documents([entry(project, "doc", size, content_hash=f"c{number}-{step}")])
                except EngineError as error:
                    failures.append(error.message)

        async def completer() -> None:
            for _ in range(40):
                try:
                    await store.complete_outbox(await claimed(store, project))
                except EngineError as error:
                    failures.append(error.message)
                await asyncio.sleep(0.005)

        async def reindexer() -> None:
            for _ in range(15):
                try:
                    await store.queue_project_for_reindex(project)
                except EngineError as error:
                    failures.append(error.message)
                await asyncio.sleep(0.01)

        await asyncio.gather(*(writer(number) for number in range(4)), completer(), completer(), reindexer())

        assert failures == []

    async def test_the_stored_embedding_model_is_read_across_projects_under_row_level_security(
        self, store, project, postgres_engine
    ) -> None:
        item = chunk(project, "doc", 0, text="modelled")
        await store.save_documents([(document(project, "doc", [item]), [EmbeddedChunk(item, embedding(1.0), "m")])])

        stored = await store.stored_embedding_model()

        # The session database holds other tests' chunks too: any one of the stored models, never None
        # (which is what the runtime role reads outside a scope).
        async with project_transaction(postgres_engine, [project]) as connection:
            ours = (await connection.execute(text("SELECT DISTINCT embedding_model FROM chunks"))).scalars().all()
        assert ours == ["m"]
        assert stored is not None

    async def test_embedding_round_trips_through_the_cache(self, store, project) -> None:
        vector = embedding(0.125, -0.5, 3.0e-5)
        item = chunk(project, "doc", 0, text="cached")

        await store.save_documents([(document(project, "doc", [item]), [EmbeddedChunk(item, vector, "m")])])

        assert (await store.cached_embeddings(project, ["hash:cached"], model="m"))["hash:cached"] == pytest.approx(
            vector
        )
