"""The vector-index contract on the in-memory fake and on real PostgreSQL + pgvector."""

from __future__ import annotations

import pytest

from app.domain.errors import EngineUnavailableError
from app.domain.models import Filters
from app.engines.embedded_postgres import EmbeddedPostgres
from app.engines.memory import InMemoryDocumentStore, InMemoryVectorIndex
from app.engines.migrate import run_migrations
from app.engines.postgres import PgVectorIndex, PostgresDocumentStore, create_postgres_engine
from tests.contract.document_store import embedding
from tests.contract.vector_index import VectorIndexContract


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
