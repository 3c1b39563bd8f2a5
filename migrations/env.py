"""Alembic environment: async (asyncpg) online migrations, offline SQL, and a caller-supplied connection.

The embedding dimension is read from `-x dimensions=N`, else `config.attributes["embedding_dimensions"]`,
else 384, and handed to the revisions through `config.attributes`. The database URL is, in order: a
connection in `config.attributes["connection"]`, `-x url=...`, `sqlalchemy.url`, env `DATABASE_URL`.
`config.attributes["lock_timeout"]` (a PostgreSQL interval, `5000ms`) bounds each lock wait of the
migration's transaction; unset, they wait.
"""

from __future__ import annotations

import asyncio
import os
from typing import TYPE_CHECKING

from alembic import context
from sqlalchemy import pool, text

from app.engines.postgres_connect import asyncpg_url, create_asyncpg_engine
from app.engines.schema import DEFAULT_EMBEDDING_DIMENSIONS, build_metadata

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

MIGRATION_LOCK_ID = 7_402_113_001
"""Advisory lock key: processes sharing one database migrate one at a time."""

config = context.config
x_arguments = context.get_x_argument(as_dictionary=True)
embedding_dimensions = int(
    x_arguments.get("dimensions") or config.attributes.get("embedding_dimensions") or DEFAULT_EMBEDDING_DIMENSIONS
)
config.attributes["embedding_dimensions"] = embedding_dimensions
target_metadata = build_metadata(embedding_dimensions)


def database_url() -> str:
    url = x_arguments.get("url") or config.get_main_option("sqlalchemy.url") or os.environ.get("DATABASE_URL")
    if not url:
        message = "no database URL: pass -x url=..., set sqlalchemy.url or DATABASE_URL"
        raise RuntimeError(message)
    return url


def run_migrations_offline() -> None:
    context.configure(url=asyncpg_url(database_url())[0], target_metadata=target_metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


def do_run_migrations(connection: Connection) -> None:
    """Migrate on `connection` under the session's advisory lock; commits what the connection had begun.

    The lock is the session's, not a transaction's: a migration that commits midway (0008 fills its keys
    after committing its columns) keeps it. A run that fails leaves it to the connection's close.
    """
    connection.execute(text("SELECT pg_advisory_lock(:key)"), {"key": MIGRATION_LOCK_ID})
    # After the advisory lock, which waits for another run however long it migrates. Every later lock wait
    # (an ALTER TABLE behind a long transaction, which serving queries then queue behind) is bounded; the
    # caller tries again (`app.engines.migrate`, MIGRATION_LOCK_TIMEOUT_S). The session's, for the same reason.
    lock_timeout = config.attributes.get("lock_timeout")
    if lock_timeout is not None:
        connection.execute(text("SELECT set_config('lock_timeout', :value, false)"), {"value": lock_timeout})
    connection.commit()  # alembic's transaction must be its own, or an autocommit block cannot commit it
    context.configure(connection=connection, target_metadata=target_metadata, compare_server_default=True)
    with context.begin_transaction():
        context.run_migrations()
    connection.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": MIGRATION_LOCK_ID})
    connection.execute(text("RESET lock_timeout"))
    connection.commit()


async def run_async_migrations() -> None:
    engine = create_asyncpg_engine(database_url(), poolclass=pool.NullPool)
    try:
        async with engine.connect() as connection:
            await connection.run_sync(do_run_migrations)
            await connection.commit()
    finally:
        await engine.dispose()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        do_run_migrations(connection)
    else:
        asyncio.run(run_async_migrations())


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
