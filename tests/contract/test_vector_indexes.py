"""The vector-index contract on the in-memory fake and on real PostgreSQL + pgvector."""

from __future__ import annotations

import pytest
from sqlalchemy.ext.asyncio import create_async_engine

from app.domain.errors import EngineUnavailableError
from app.domain.models import Filters
from app.engines.embedded_postgres import EmbeddedPostgres
from app.engines.memory import InMemoryDocumentStore, InMemoryVectorIndex
from app.engines.migrate import run_migrations
from app.engines.pgvector import PgVectorIndex, create_postgres_engine
from app.engines.postgres import PostgresDocumentStore
from tests.contract.document_store import chunk, embedding
from tests.contract.vector_index import VectorIndexContract, save


class TestInMemoryVectorIndex(VectorIndexContract):
    @pytest.fixture
    def store(self):
        return InMemoryDocumentStore()

    @pytest.fixture
    def index(self, store):
        return InMemoryVectorIndex(store)

    async def test_unavailable_fake_raises(self, index) -> None:
        index.available = False

        with pytest.raises(EngineUnavailableError):
            await index.search(embedding(1.0), top_k=1, filters=Filters(project_id="p"))


@pytest.mark.integration
class TestPgVectorIndex(VectorIndexContract):
    @pytest.fixture
    def store(self, postgres_engine):
        return PostgresDocumentStore(postgres_engine)

    @pytest.fixture
    def index(self, postgres_engine):
        return PgVectorIndex(postgres_engine, ef_search=40)

    async def test_top_k_above_ef_search_still_fills(self, store, postgres_engine, project) -> None:
        # top_k > ef_search takes the per-transaction SET LOCAL path instead of the preset session.
        await save(store, [(chunk(project, "doc", i), embedding(1.0, i / 10)) for i in range(6)])

        hits = await PgVectorIndex(postgres_engine, ef_search=2).search(
            embedding(1.0), top_k=5, filters=Filters(project_id=project)
        )

        assert [h.chunk_id for h in hits] == [f"doc#{i}" for i in range(5)]

    async def test_engine_without_preset_sessions_still_searches(self, store, migrated_postgres_url, project) -> None:
        await save(
            store,
            [(chunk(project, "a", 0, tags=("t",)), embedding(0.0, 1.0)), (chunk(project, "b", 0), embedding(1.0))],
        )
        plain_engine = create_async_engine(migrated_postgres_url)
        try:
            hits = await PgVectorIndex(plain_engine).search(
                embedding(1.0), top_k=5, filters=Filters(project_id=project, tags=("t",))
            )
        finally:
            await plain_engine.dispose()

        assert [h.chunk_id for h in hits] == ["a#0"]


@pytest.mark.integration
@pytest.mark.slow
async def test_stopped_server_makes_ping_and_search_unavailable(tmp_path) -> None:
    server = EmbeddedPostgres(tmp_path / "pg")
    url = server.start()
    run_migrations(url, embedding_dimensions=384)
    engine = create_postgres_engine(url, pool_size=1, connect_timeout_s=2.0)
    index, store = PgVectorIndex(engine), PostgresDocumentStore(engine)
    try:
        await index.ping()
        server.stop()

        with pytest.raises(EngineUnavailableError) as ping_error:
            await index.ping()
        with pytest.raises(EngineUnavailableError) as search_error:
            await index.search(embedding(1.0), top_k=3, filters=Filters(project_id="p"))
        with pytest.raises(EngineUnavailableError) as store_error:
            await store.ping()
    finally:
        await engine.dispose()
        server.stop()

    assert (ping_error.value.engine, search_error.value.engine, store_error.value.engine) == (
        "pgvector",
        "pgvector",
        "postgres",
    )
