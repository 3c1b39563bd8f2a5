"""The alembic migrations create exactly the tables of `app.engines.schema`, and re-running them is harmless."""

from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
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
