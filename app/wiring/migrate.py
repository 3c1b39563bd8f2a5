"""`poimen migrate`: apply the schema to DATABASE_URL, or to the embedded server it starts for the purpose.

Sized by `EMBEDDING_DIMENSIONS`, not by loading the model: the migration Job stays small and never
imports torch (`poimen serve` checks the model against the setting at start).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from app.engines.embedded_postgres import EmbeddedPostgres
from app.engines.migrate import run_migrations
from app.engines.migration_locks import LockWait
from app.engines.postgres_roles import grant_runtime_role

if TYPE_CHECKING:
    from app.config import Settings


async def migrate(settings: Settings) -> int:
    """Bring the schema to head with `EMBEDDING_DIMENSIONS`-dimension embeddings; return that dimension.

    With `DATABASE_RUNTIME_ROLE`, then grant that role what the service needs (`ConfigurationError` when the
    role is missing, a superuser or the owner): after the migrations, so new tables are granted too.
    """
    embedded = None
    database_url = settings.database_url
    if database_url is None:
        embedded = EmbeddedPostgres(settings.embedded_postgres_dir)
        database_url = await asyncio.to_thread(embedded.start)
    try:
        await asyncio.to_thread(
            run_migrations,
            database_url,
            embedding_dimensions=settings.embedding_dimensions,
            lock_wait=migration_lock_wait(settings),
        )
        if settings.database_runtime_role is not None:
            await grant_runtime_role(database_url, settings.database_runtime_role)
    finally:
        if embedded is not None:
            embedded.stop()
    return settings.embedding_dimensions


def migration_lock_wait(settings: Settings) -> LockWait:
    """How long each try waits for a table's lock, and how many tries (MIGRATION_LOCK_TIMEOUT_S, _ATTEMPTS)."""
    return LockWait(timeout_s=settings.migration_lock_timeout_s, attempts=settings.migration_lock_attempts)
