"""Contract-tier fixtures: a migrated PostgreSQL and one engine on it for the whole session.

The engine logs in as the embedded runtime role, as the service does: every PostgreSQL contract test
also proves its path works under the row-level security policies.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from app.engines.migrate import run_migrations
from app.engines.pgvector import create_postgres_engine
from app.engines.postgres_roles import ensure_runtime_role
from tests.contract.opensearch_servers import (  # noqa: F401 - fixtures shared by the OpenSearch modules
    noida_url,
    opensearch_alias,
    opensearch_client,
    opensearch_url,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from sqlalchemy.ext.asyncio import AsyncEngine

CONTRACT_EMBEDDING_DIMENSIONS = 384
"""The schema's default; contract tests pad short hand-written vectors to it."""


@pytest.fixture(scope="session")
def migrated_postgres_url(postgres_url: str) -> str:
    """The session PostgreSQL, migrated to head once (384-dimensional embeddings)."""
    run_migrations(postgres_url, embedding_dimensions=CONTRACT_EMBEDDING_DIMENSIONS)
    return postgres_url


@pytest.fixture(scope="session")
async def postgres_engine(migrated_postgres_url: str) -> AsyncIterator[AsyncEngine]:
    """One asyncpg engine on the migrated database as the runtime role, shared by every PostgreSQL adapter under test."""
    engine = create_postgres_engine(await ensure_runtime_role(migrated_postgres_url), pool_size=8)
    yield engine
    await engine.dispose()
