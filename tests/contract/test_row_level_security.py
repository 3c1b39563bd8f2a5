"""Row-level security on the embedded PostgreSQL: a query that forgot its project filter sees one project only.

The engine of these tests logs in as the runtime role, as the service does (`postgres_engine`), and
the statements below deliberately carry no `project_id` condition: only the policies keep the other
project out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from sqlalchemy import event, text
from sqlalchemy.exc import DBAPIError

from app.config import Settings
from app.domain.models import Filters
from app.engines.pgvector import PgVectorIndex, create_postgres_engine
from app.engines.postgres import PostgresDocumentStore
from app.engines.postgres_roles import RUNTIME_ROLE, ensure_runtime_role
from app.engines.postgres_scope import ALL_PROJECTS, all_projects_transaction, project_transaction
from app.ingestion.catalog import ProjectCatalog
from app.wiring.engines import open_engines
from tests.contract.document_store import embedding, entry

if TYPE_CHECKING:
    from pathlib import Path

    from sqlalchemy.ext.asyncio import AsyncEngine

pytestmark = pytest.mark.integration

PROJECT_TABLES = ("documents", "chunks", "lexical_outbox", "project_generations")


@pytest.fixture
async def two_projects(postgres_engine: AsyncEngine, unique_name: str) -> tuple[str, str]:
    """Two projects with two documents each, still queued for lexical indexing (rows in every table)."""
    store = PostgresDocumentStore(postgres_engine)
    mine, theirs = f"{unique_name}_mine", f"{unique_name}_theirs"
    await store.save_documents([entry(project, f"doc{n}", 2) for project in (mine, theirs) for n in range(2)])
    return mine, theirs


async def test_an_unfiltered_query_in_a_project_transaction_sees_that_project_only(
    postgres_engine: AsyncEngine, two_projects: tuple[str, str]
) -> None:
    mine, theirs = two_projects
    seen: dict[str, set[str]] = {}
    async with project_transaction(postgres_engine, [mine]) as connection:
        for table in PROJECT_TABLES:
            rows = await connection.execute(text(f"SELECT DISTINCT project_id FROM {table}"))  # noqa: S608 - constant names
            seen[table] = {row.project_id for row in rows}

    assert seen == {table: {mine} for table in PROJECT_TABLES}
    assert theirs not in set().union(*seen.values())


async def test_the_policies_read_the_scope_once_per_statement_not_per_row(
    postgres_engine: AsyncEngine, two_projects: tuple[str, str]
) -> None:
    # Migration 0007: a sequential scan (the exact vector search of a small project) must not parse the
    # project list for every row; the scope is an InitPlan, computed once when the statement starts.
    plans: dict[str, str] = {}
    async with project_transaction(postgres_engine, [two_projects[0]]) as connection:
        await connection.execute(text("SET LOCAL enable_indexscan = off"))
        await connection.execute(text("SET LOCAL enable_bitmapscan = off"))
        for table in PROJECT_TABLES:
            rows = await connection.execute(text(f"EXPLAIN (VERBOSE) SELECT * FROM {table}"))  # noqa: S608 - constant names
            plans[table] = "\n".join(row[0] for row in rows)

    for table, plan in plans.items():
        row_filter = next(line for line in plan.splitlines() if line.strip().startswith("Filter:"))
        assert "current_setting" not in row_filter, (table, plan)
        assert plan.count("InitPlan") >= 2, (table, plan)  # one per policy's setting


async def test_a_transaction_with_no_project_set_sees_nothing(
    migrated_postgres_url: str, two_projects: tuple[str, str]
) -> None:
    # One pooled connection, so the bare transaction runs right after the scoped one on the same session.
    engine = create_postgres_engine(await ensure_runtime_role(migrated_postgres_url), pool_size=1)
    counts: dict[str, int] = {}
    try:
        async with project_transaction(engine, [two_projects[0]]) as connection:
            scoped = (await connection.execute(text("SELECT count(*) FROM chunks"))).scalar_one()
            scoped_backend = (await connection.execute(text("SELECT pg_backend_pid()"))).scalar_one()
        async with engine.connect() as connection:
            bare_backend = (await connection.execute(text("SELECT pg_backend_pid()"))).scalar_one()
            for table in PROJECT_TABLES:
                counts[table] = (await connection.execute(text(f"SELECT count(*) FROM {table}"))).scalar_one()  # noqa: S608
        async with project_transaction(engine, []) as connection:
            empty_scope = (await connection.execute(text("SELECT count(*) FROM documents"))).scalar_one()
    finally:
        await engine.dispose()

    assert bare_backend == scoped_backend  # the very session the scoped transaction ran on
    assert scoped == 4  # two documents of two chunks
    assert counts == dict.fromkeys(PROJECT_TABLES, 0)
    assert empty_scope == 0


async def test_rows_of_another_project_cannot_be_written_or_changed(
    postgres_engine: AsyncEngine, two_projects: tuple[str, str]
) -> None:
    mine, theirs = two_projects
    async with project_transaction(postgres_engine, [mine], write=True) as connection:
        # An UPDATE that forgot its filter changes this project's rows only.
        retitled = (await connection.execute(text("UPDATE documents SET title = 'retitled'"))).rowcount
    with pytest.raises(DBAPIError, match="row-level security"):
        async with project_transaction(postgres_engine, [mine], write=True) as connection:
            await connection.execute(
                text(
                    "INSERT INTO documents (project_id, document_id, source, title, content_hash) "
                    "VALUES (:project, 'planted', 's', 't', 'h')"
                ),
                {"project": theirs},
            )
    async with all_projects_transaction(postgres_engine, reason="list projects") as connection:
        titles = dict(
            (
                await connection.execute(
                    text("SELECT project_id, min(title) FROM documents WHERE project_id = ANY(:p) GROUP BY project_id"),
                    {"p": [mine, theirs]},
                )
            ).all()
        )

    assert retitled == 2  # this project's two documents
    assert titles[mine] == "retitled"
    assert titles[theirs] != "retitled"


async def test_the_projects_listing_of_a_token_naming_projects_reads_in_their_scope_only(
    postgres_engine: AsyncEngine, two_projects: tuple[str, str]
) -> None:
    # `GET /v1/projects` for a token naming projects: it read every project's ids in the maintenance scope
    # and kept the granted ones in Python, so the policies did not hold that request's statement.
    mine, theirs = two_projects
    store = PostgresDocumentStore(postgres_engine)
    catalog = ProjectCatalog(store=store)
    statements: list[str] = []

    def record(*arguments: object) -> None:
        statements.append(str(arguments[2]))  # (connection, cursor, statement, parameters, context, many)

    event.listen(postgres_engine.sync_engine, "before_cursor_execute", record)
    try:
        granted = await catalog.projects(frozenset({mine, f"{mine}_empty"}), after=None, limit=10)
        nothing = await catalog.projects(frozenset(), after=None, limit=10)
    finally:
        event.remove(postgres_engine.sync_engine, "before_cursor_execute", record)
    every = await store.project_ids()  # the maintenance scope: reindex of every project, an operator's token

    assert granted.project_ids == (mine,)
    assert nothing.project_ids == ()
    assert {mine, theirs} <= set(every)
    assert statements
    assert not [statement for statement in statements if ALL_PROJECTS in statement]


async def test_a_session_of_the_runtime_role_can_widen_its_own_scope(
    postgres_engine: AsyncEngine, two_projects: tuple[str, str]
) -> None:
    # What docs/security.md says the policies do not stop ("What it does not stop"): they read settings any
    # session may set, so they hold the service's own statements, not SQL someone else runs as its role.
    async with postgres_engine.connect() as connection:
        unscoped = (await connection.execute(text("SELECT count(DISTINCT project_id) FROM documents"))).scalar_one()
        await connection.execute(text("SELECT set_config('poimen.scope', 'all_projects', true)"))
        seen = {row.project_id for row in await connection.execute(text("SELECT project_id FROM documents"))}
        await connection.rollback()

    assert unscoped == 0
    assert set(two_projects) <= seen


async def test_the_runtime_role_is_no_superuser_no_owner_and_cannot_bypass(postgres_engine: AsyncEngine) -> None:
    async with postgres_engine.connect() as connection:
        role = (
            await connection.execute(
                text("SELECT current_user AS name, rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user")
            )
        ).one()
        owned = (
            await connection.execute(
                text("SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tableowner = current_user")
            )
        ).all()

    assert (role.name, role.rolsuper, role.rolbypassrls) == (RUNTIME_ROLE, False, False)
    assert owned == []


@pytest.mark.slow
async def test_the_embedded_service_connects_as_the_runtime_role(tmp_path: Path) -> None:
    settings = Settings(_env_file=None, poimen_data_dir=tmp_path / "data")  # type: ignore[call-arg]
    async with open_engines(settings) as engines:
        assert isinstance(engines.vector, PgVectorIndex)
        await engines.vector.search(embedding(1.0), top_k=3, filters=Filters(project_id="p"))
        assert engines.embedded_postgres is not None
        owner = create_postgres_engine(engines.embedded_postgres.start(), pool_size=1)
        try:
            async with owner.connect() as connection:
                users = (
                    await connection.execute(
                        text(
                            "SELECT DISTINCT usename FROM pg_stat_activity WHERE application_name = 'poimen-memory' "
                            "AND pid <> pg_backend_pid()"
                        )
                    )
                ).all()
        finally:
            await owner.dispose()

    assert [row.usename for row in users] == [RUNTIME_ROLE]


async def test_the_generation_function_reads_one_project_and_leaves_no_scope_behind(
    migrated_postgres_url: str, two_projects: tuple[str, str]
) -> None:
    mine, theirs = two_projects
    # One pooled connection: the statements after the function run on the session it ran on.
    engine = create_postgres_engine(await ensure_runtime_role(migrated_postgres_url), pool_size=1)
    store = PostgresDocumentStore(engine)
    try:
        generations = (await store.project_generation(mine), await store.project_generation(theirs))
        async with engine.connect() as connection:
            after_alone = (await connection.execute(text("SELECT count(*) FROM chunks"))).scalar_one()
        async with project_transaction(engine, [mine]) as connection:
            inside = (
                await connection.execute(text("SELECT poimen_project_generation(:project)"), {"project": theirs})
            ).scalar_one()
            projects_after = {row.project_id for row in await connection.execute(text("SELECT project_id FROM chunks"))}
    finally:
        await engine.dispose()

    assert all(generation > 0 for generation in generations)  # both projects have written
    assert inside == generations[1]  # it reads the project it is asked for, whatever the caller's scope
    assert after_alone == 0  # called alone, its scope ended with its statement
    assert projects_after == {mine}  # called inside a transaction, the caller's scope is back unchanged
