"""The alembic migrations create exactly the tables of `app.engines.schema`, and re-running them is harmless."""

from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from app.engines.migrate import run_migrations
from app.engines.schema import metadata

pytestmark = pytest.mark.integration


async def test_migrated_database_matches_schema_module(migrated_postgres_url) -> None:
    engine = create_async_engine(migrated_postgres_url)
    try:
        async with engine.connect() as connection:
            differences = await connection.run_sync(
                lambda sync: compare_metadata(MigrationContext.configure(sync), metadata)
            )
    finally:
        await engine.dispose()

    assert differences == []


def test_migrating_again_at_head_changes_nothing(migrated_postgres_url) -> None:
    run_migrations(migrated_postgres_url, embedding_dimensions=384)


async def test_every_table_with_project_rows_has_forced_row_level_security_policies(migrated_postgres_url) -> None:
    tables = ("chunks", "documents", "lexical_outbox", "project_generations")
    engine = create_async_engine(migrated_postgres_url)
    try:
        async with engine.connect() as connection:
            policies = (
                await connection.execute(
                    text(
                        "SELECT tablename, policyname, cmd, permissive, qual, with_check FROM pg_policies "
                        "WHERE schemaname = 'public' ORDER BY tablename, policyname"
                    )
                )
            ).all()
            flags = (
                await connection.execute(
                    text(
                        "SELECT relname, relrowsecurity, relforcerowsecurity FROM pg_class "
                        "WHERE relname = ANY(:tables) ORDER BY relname"
                    ),
                    {"tables": list(tables)},
                )
            ).all()
    finally:
        await engine.dispose()

    assert [(row.tablename, row.policyname) for row in policies] == [
        (table, policy) for table in tables for policy in ("maintenance_scope", "project_scope")
    ]
    assert {(row.cmd, row.permissive) for row in policies} == {("ALL", "PERMISSIVE")}
    assert all(row.qual == row.with_check for row in policies)
    assert all("poimen.project_ids" in row.qual for row in policies if row.policyname == "project_scope")
    assert all("poimen.scope" in row.qual for row in policies if row.policyname == "maintenance_scope")
    assert [tuple(row) for row in flags] == [(table, True, True) for table in tables]
