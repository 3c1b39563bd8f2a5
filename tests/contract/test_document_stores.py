"""The document-store contract on the in-memory fake and on real PostgreSQL."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from app.domain.errors import EngineError, EngineUnavailableError
from app.domain.models import EmbeddedChunk
from app.engines.memory import InMemoryDocumentStore
from app.engines.postgres import PostgresDocumentStore
from tests.contract.document_store import DocumentStoreContract, chunk, document, embedding, entry


class TestInMemoryDocumentStore(DocumentStoreContract):
    @pytest.fixture
    def store(self):
        return InMemoryDocumentStore()

    async def test_unavailable_fake_raises(self, store) -> None:
        store.available = False

        with pytest.raises(EngineUnavailableError):
            await store.ping()


@pytest.mark.integration
class TestPostgresDocumentStore(DocumentStoreContract):
    @pytest.fixture
    def store(self, postgres_engine):
        return PostgresDocumentStore(postgres_engine)

    async def test_failed_batch_writes_nothing(self, store, project) -> None:
        bad = chunk(project, "bad", 0)
        batch = [entry(project, "good", 2), (document(project, "bad", [bad]), [EmbeddedChunk(bad, [1.0, 0.0], "m")])]

        with pytest.raises(EngineError) as error:
            await store.save_documents(batch)

        assert error.value.engine == "postgres"
        assert await store.get_document(project, "good") is None

    async def test_chunks_are_marked_indexed_only_on_completion(self, store, project, postgres_engine) -> None:
        await store.save_documents([entry(project, "doc", 2)])
        flags = "SELECT bool_and(lexically_indexed) FROM chunks WHERE project_id = :p"
        async with postgres_engine.connect() as connection:
            before = (await connection.execute(text(flags), {"p": project})).scalar_one()
        await store.complete_outbox([d for d in await store.claim_outbox(limit=100_000) if d.project_id == project])

        async with postgres_engine.connect() as connection:
            after = (await connection.execute(text(flags), {"p": project})).scalar_one()
        assert (before, after) == (False, True)

    async def test_embedding_round_trips_through_the_cache(self, store, project) -> None:
        vector = embedding(0.125, -0.5, 3.0e-5)
        item = chunk(project, "doc", 0, text="cached")

        await store.save_documents([(document(project, "doc", [item]), [EmbeddedChunk(item, vector, "m")])])

        assert (await store.cached_embeddings(["hash:cached"], model="m"))["hash:cached"] == pytest.approx(vector)
