"""The vector-index contract on the in-memory fake and on real PostgreSQL + pgvector."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import TYPE_CHECKING

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from app.domain.errors import EngineUnavailableError
from app.domain.models import Filters
from app.engines import pgvector
from app.engines.embedded_postgres import EmbeddedPostgres
from app.engines.memory import InMemoryDocumentStore
from app.engines.memory_vectors import InMemoryVectorIndex
from app.engines.migrate import run_migrations
from app.engines.pgvector import PgVectorIndex, create_postgres_engine
from app.engines.postgres import PostgresDocumentStore
from app.engines.postgres_roles import ensure_runtime_role
from app.engines.postgres_sql import SELECT_PROJECT_SIZE, exact_search_sql, filter_sql, nearest_search_sql
from tests.contract.document_store import chunk, embedding
from tests.contract.vector_index import VectorIndexContract, ids, save

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

    from app.domain.models import ScoredHit

BACKEND_EXIT_TIMEOUT_S = 30.0
"""How long a terminated PostgreSQL backend may take to leave pg_stat_activity."""


async def runtime_engine(migrated_postgres_url: str, *, pool_size: int) -> AsyncEngine:
    """An engine of its own as the service's runtime role, with `pool_size` connections (the caller disposes it)."""
    return create_postgres_engine(await ensure_runtime_role(migrated_postgres_url), pool_size=pool_size)


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

    async def test_a_project_small_for_its_table_is_ranked_exactly_and_counted_once(
        self, store, postgres_engine, project, monkeypatch
    ) -> None:
        sent = record_statements(monkeypatch)
        await save(store, [(chunk(project, "doc", i), embedding(1.0, i / 10)) for i in range(12)])
        index = PgVectorIndex(postgres_engine, ef_search=40)

        for _ in range(2):
            hits = await index.search(embedding(1.0), top_k=5, filters=Filters(project_id=project))

        assert [h.chunk_id for h in hits] == [f"doc#{i}" for i in range(5)]
        searches = searches_of(sent, project)
        assert searches == ["exact", "exact"]
        assert sent.count(SELECT_PROJECT_SIZE) == 1  # the count is kept for a while, not read per search

    async def test_a_project_counted_past_its_limit_walks_the_graph(
        self, store, postgres_engine, project, monkeypatch
    ) -> None:
        # With no table-size floor the count stops at one row: "at least one" is no proof the scan is cheaper.
        monkeypatch.setattr(pgvector, "COUNT_TABLE_ROWS_FLOOR", 0.0)
        sent = record_statements(monkeypatch)
        await save(store, [(chunk(project, "doc", i), embedding(1.0, i / 10)) for i in range(12)])

        hits = await PgVectorIndex(postgres_engine, ef_search=40).search(
            embedding(1.0), top_k=5, filters=Filters(project_id=project)
        )

        assert [h.chunk_id for h in hits] == [f"doc#{i}" for i in range(5)]
        assert searches_of(sent, project) == ["graph"]

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

    async def test_a_long_chunk_keeps_its_vector_in_the_row(self, store, migrated_postgres_url, project) -> None:
        # Migration 0006: the vector stays in the heap row (no TOAST fetch per distance); the text moves out.
        rng_text = " ".join(f"word{number * 7919 % 10007}" for number in range(1200))  # ~11 kB, compressible
        dense = [((number * 37) % 101) / 101 - 0.5 for number in range(384)]  # no zeros: nothing to compress
        long_chunk = replace(chunk(project, "long", 0, text=rng_text), chunk_hash="hash-of-long")
        await save(store, [(long_chunk, dense)])
        owner = create_async_engine(migrated_postgres_url)  # the migrating superuser: not held by row-level security
        try:
            async with owner.connect() as connection:
                storage = (
                    await connection.execute(
                        text(
                            "SELECT CAST(attstorage AS text) FROM pg_attribute "
                            "WHERE attrelid = 'chunks'::regclass AND attname = 'embedding'"
                        )
                    )
                ).scalar()
                vector_out_of_line, text_out_of_line = (
                    await connection.execute(
                        text(
                            "SELECT pg_column_toast_chunk_id(embedding) IS NOT NULL, "
                            "pg_column_toast_chunk_id(text) IS NOT NULL FROM chunks "
                            "WHERE project_id = :project AND chunk_id = 'long#0'"
                        ),
                        {"project": project},
                    )
                ).one()
        finally:
            await owner.dispose()

        assert storage == "m"
        assert (vector_out_of_line, text_out_of_line) == (False, True)

    async def test_searches_cancelled_at_any_point_leave_the_pool_clean(
        self, store, migrated_postgres_url, project
    ) -> None:
        # The read runs on the driver's connection (app/engines/postgres_driver.py): whatever await a
        # cancellation lands on, the one pooled connection must come back usable and scoped to nothing.
        await save(store, [(chunk(project, "doc", i), embedding(1.0, i / 10)) for i in range(6)])
        engine = await runtime_engine(migrated_postgres_url, pool_size=1)
        index = PgVectorIndex(engine)
        filters = Filters(project_id=project)

        async def hybrid_read() -> tuple[list[ScoredHit], dict[str, str]]:
            async with index.read(project) as read:  # the confirmation first, as a hybrid search asks
                existing = await read.existing_chunks(project, ["doc#5"], filters=filters)
                return await read.search(embedding(1.0), top_k=3, filters=filters), existing

        try:
            await index.search(embedding(1.0), top_k=3, filters=filters)  # learns the preset sessions first
            outcomes = {"cancelled": 0, "finished": 0}
            for attempt_number in range(40):
                task = asyncio.create_task(hybrid_read())
                for _ in range(attempt_number % 10):  # cancel after 0..9 turns of the loop
                    await asyncio.sleep(0)
                task.cancel()
                try:
                    await task
                    outcomes["finished"] += 1
                except asyncio.CancelledError:
                    outcomes["cancelled"] += 1
            hits, existing = await hybrid_read()
            async with engine.connect() as connection:
                scope = (await connection.execute(text("SELECT current_setting('poimen.project_ids', true)"))).scalar()
                visible = (await connection.execute(text("SELECT count(*) FROM chunks"))).scalar()
        finally:
            await engine.dispose()

        assert outcomes["cancelled"] > 0
        assert [h.chunk_id for h in hits] == ["doc#0", "doc#1", "doc#2"]
        assert set(existing) == {"doc#5"}
        assert scope in {None, ""}  # the search's SET LOCAL ended with its transaction
        assert visible == 0  # and so no row is visible outside one

    async def test_a_call_cut_off_inside_a_read_fails_the_rest_of_it_and_the_pool_stays_clean(
        self, store, migrated_postgres_url, project
    ) -> None:
        # A deadline that cuts one call off (the confirmation's, the search's) leaves the read's connection
        # mid-statement: the read's later calls fail at once, and the connection is dropped at the read's end
        # instead of going back to the pool still busy.
        await save(store, [(chunk(project, "doc", i), embedding(1.0, i / 10)) for i in range(6)])
        engine = await runtime_engine(migrated_postgres_url, pool_size=1)
        index = PgVectorIndex(engine)
        filters = Filters(project_id=project)
        outcomes = {"cut off": 0, "cancelled before it began": 0, "answered": 0}
        refusals: list[str] = []
        try:
            await index.search(embedding(1.0), top_k=3, filters=filters)
            for attempt_number in range(30):
                async with index.read(project) as read:
                    call = asyncio.create_task(read.existing_chunks(project, ["doc#5"], filters=filters))
                    for _ in range(attempt_number % 6):
                        await asyncio.sleep(0)
                    call.cancel()
                    try:
                        await call
                        outcomes["answered"] += 1
                        assert ids(await read.search(embedding(1.0), top_k=1, filters=filters)) == ["doc#0"]
                    except asyncio.CancelledError:
                        try:
                            later = await read.search(embedding(1.0), top_k=1, filters=filters)
                        except EngineUnavailableError as error:
                            refusals.append(str(error))
                            outcomes["cut off"] += 1
                        else:  # cancelled before its statement was sent: the read is whole
                            assert ids(later) == ["doc#0"]
                            outcomes["cancelled before it began"] += 1
            hits = await index.search(embedding(1.0), top_k=3, filters=filters)
            async with engine.connect() as connection:
                scope = (await connection.execute(text("SELECT current_setting('poimen.project_ids', true)"))).scalar()
        finally:
            await engine.dispose()

        assert outcomes["cut off"] > 0
        assert all("cut off" in refusal for refusal in refusals)
        assert [h.chunk_id for h in hits] == ["doc#0", "doc#1", "doc#2"]
        assert scope in {None, ""}

    async def test_a_read_begins_at_entry_only_while_few_reads_are_open_and_most_of_the_pool_is_free(
        self, store, migrated_postgres_url, project
    ) -> None:
        await save(store, [(chunk(project, "doc", i), embedding(1.0, i / 10)) for i in range(3)])
        engine = await runtime_engine(migrated_postgres_url, pool_size=8)
        index = PgVectorIndex(engine)
        filters = Filters(project_id=project)
        in_use: dict[str, int] = {}
        try:
            await index.search(embedding(1.0), top_k=1, filters=filters)
            async with index.read(project) as read:
                in_use["idle pool, at entry"] = engine.pool.checkedout()
                began = [read.began]
            async with index.read(project) as first, index.read(project) as second, index.read(project) as third:
                in_use["three reads open"] = engine.pool.checkedout()
                at_once = (first.began, second.began, third.began)
            async with engine.connect(), engine.connect(), engine.connect(), engine.connect():  # half busy
                async with index.read(project) as read:
                    in_use["half busy, at entry"] = engine.pool.checkedout()
                    began.append(read.began)
                    hits = await read.search(embedding(1.0), top_k=1, filters=filters)
                    in_use["half busy, after a call"] = engine.pool.checkedout()
                    began.append(read.began)
                in_use["half busy, after the read"] = engine.pool.checkedout()
        finally:
            await engine.dispose()

        assert in_use == {
            "idle pool, at entry": 1,  # begun ahead: its connection taken before any call
            "three reads open": 2,  # a third read at once is more searches than cores to overlap them with
            "half busy, at entry": 4,  # not begun: it would hold a connection while the query is embedded
            "half busy, after a call": 5,
            "half busy, after the read": 4,
        }
        assert began == [True, False, True]
        assert at_once == (True, True, False)
        assert [h.chunk_id for h in hits] == ["doc#0"]

    async def test_a_search_whose_connection_was_killed_fails_once_then_recovers(
        self, store, migrated_postgres_url, project
    ) -> None:
        await save(store, [(chunk(project, "doc", 0), embedding(1.0))])
        engine = await runtime_engine(migrated_postgres_url, pool_size=1)
        owner = create_async_engine(migrated_postgres_url)
        index = PgVectorIndex(engine)
        filters = Filters(project_id=project)
        try:
            before = await index.search(embedding(1.0), top_k=1, filters=filters)
            async with engine.connect() as pooled:  # the pool's one connection, the one the search used
                backend = (await pooled.execute(text("SELECT pg_backend_pid()"))).scalar()
            async with owner.connect() as connection:
                killed = (
                    await connection.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": backend})
                ).scalar()
                deadline = asyncio.get_running_loop().time() + BACKEND_EXIT_TIMEOUT_S
                while (
                    await connection.execute(
                        text("SELECT count(*) FROM pg_stat_activity WHERE pid = :pid"), {"pid": backend}
                    )
                ).scalar():
                    # A transaction reads pg_stat_activity once and keeps that snapshot: polled in one, a
                    # backend still there at the first read stayed there forever (a hang under load).
                    await connection.rollback()
                    if asyncio.get_running_loop().time() > deadline:
                        pytest.fail(f"backend {backend} still runs {BACKEND_EXIT_TIMEOUT_S} s after its termination")
                    await asyncio.sleep(0.05)
            with pytest.raises(EngineUnavailableError) as failed:
                await index.search(embedding(1.0), top_k=1, filters=filters)
            after = await index.search(embedding(1.0), top_k=1, filters=filters)
        finally:
            await engine.dispose()
            await owner.dispose()

        assert killed is True
        assert failed.value.engine == "pgvector"
        assert [h.chunk_id for h in before] == [h.chunk_id for h in after] == ["doc#0"]


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


def record_statements(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every statement `PgVectorIndex` sends from now on, in order (they still run on the real engine)."""
    sent: list[str] = []
    send = pgvector.fetch

    async def recording(connection, statement, parameters):
        sent.append(statement)
        return await send(connection, statement, parameters)

    monkeypatch.setattr(pgvector, "fetch", recording)
    return sent


def searches_of(sent: list[str], project: str) -> list[str]:
    """Which way each vector search of `Filters(project_id=project)` went: "exact" or "graph"."""
    where = filter_sql(Filters(project_id=project), {})
    kinds = {exact_search_sql(where): "exact", nearest_search_sql(where): "graph"}
    return [kinds[statement] for statement in sent if statement in kinds]
