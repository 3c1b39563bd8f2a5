"""Bring a database to the newest schema with alembic, from the CLI (`poimen migrate`) or at start-up."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from alembic.util.exc import CommandError
from sqlalchemy import text

from app.config import ConfigurationError
from app.domain.errors import EngineTimeoutError
from app.engines.migration_locks import LockWait, is_lock_timeout, lock_holders, lock_timeout_message
from app.engines.postgres_connect import create_asyncpg_engine
from app.engines.postgres_errors import translate_errors

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

MIGRATIONS_DIR_ENV = "POIMEN_MIGRATIONS_DIR"
logger = logging.getLogger(__name__)
DEFAULT_LOCK_WAIT = LockWait()


def migrations_dir() -> Path:
    """The alembic `migrations/` folder.

    `$POIMEN_MIGRATIONS_DIR`, else beside the `app` package (the repo root, also with
    `pip install -e .`), else `./migrations`.
    """
    override = os.environ.get(MIGRATIONS_DIR_ENV)
    candidates = [Path(override)] if override else []
    candidates += [Path(__file__).resolve().parents[2] / "migrations", Path.cwd() / "migrations"]
    for candidate in candidates:
        if (candidate / "env.py").is_file():
            return candidate
    message = f"{MIGRATIONS_DIR_ENV}: no alembic migrations/ folder found (looked in {', '.join(map(str, candidates))})"
    raise ConfigurationError(message)


def alembic_config(database_url: str, *, embedding_dimensions: int, lock_wait: LockWait | None = None) -> Config:
    """An alembic `Config` for `database_url` that works from any working directory.

    With `lock_wait`, the migration session's statements wait at most `lock_wait.timeout_s` for a lock
    (`migrations/env.py`); without, as long as it takes.
    """
    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    # `%` would be taken for interpolation by configparser (passwords may contain it).
    config.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    config.attributes["embedding_dimensions"] = embedding_dimensions
    if lock_wait is not None:
        config.attributes["lock_timeout"] = lock_wait.lock_timeout_setting
    return config


def run_migrations(database_url: str, *, embedding_dimensions: int, lock_wait: LockWait = DEFAULT_LOCK_WAIT) -> None:
    """Run `alembic upgrade head`, then check the stored embedding dimension matches `embedding_dimensions`.

    Safe to call when already at head, and from several processes at once (they take turns on an
    advisory lock). Blocks; callable from inside a running event loop (it then migrates on a
    worker thread). Raises `ConfigurationError` when the database was created for another dimension,
    and `EngineTimeoutError` naming the lock's holders when every try of `lock_wait` gave up waiting for a
    table's lock (nothing changed then).
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        _upgrade_and_check(database_url, embedding_dimensions, lock_wait)
        return
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="migrations") as executor:
        executor.submit(_upgrade_and_check, database_url, embedding_dimensions, lock_wait).result()


async def run_migrations_async(
    database_url: str, *, embedding_dimensions: int, lock_wait: LockWait = DEFAULT_LOCK_WAIT
) -> None:
    """`run_migrations` without blocking the event loop."""
    await asyncio.to_thread(_upgrade_and_check, database_url, embedding_dimensions, lock_wait)


def _upgrade_and_check(database_url: str, embedding_dimensions: int, lock_wait: LockWait) -> None:
    # A database that cannot be reached is an `EngineUnavailableError` naming the cause in one line (the
    # migration Job's log showed the driver's traceback).
    config = alembic_config(database_url, embedding_dimensions=embedding_dimensions, lock_wait=lock_wait)
    with translate_errors(engine="postgresql"):
        _upgrade_within_lock_wait(config, database_url, lock_wait)
        stored = asyncio.run(stored_embedding_dimensions(database_url))
    if stored != embedding_dimensions:
        message = (
            f"EMBEDDING_DIMENSIONS / EMBEDDING_MODEL: the database stores {stored}-dimensional embeddings but "
            f"the model makes {embedding_dimensions}; use a fresh database (or POIMEN_DATA_DIR) or the model it "
            "was built with"
        )
        raise ConfigurationError(message)


def _upgrade_within_lock_wait(config: Config, database_url: str, lock_wait: LockWait) -> None:
    """`alembic upgrade head`, tried again from the start (all in one transaction) when a lock wait timed out."""
    for attempt in range(1, lock_wait.attempts + 1):
        try:
            command.upgrade(config, "head")
        except CommandError as error:
            raise _newer_schema(config, error) from None
        except Exception as error:
            if not is_lock_timeout(error):
                raise
            if attempt == lock_wait.attempts:
                message = lock_timeout_message(lock_wait, asyncio.run(lock_holders(database_url)))
                raise EngineTimeoutError(message, engine="postgresql") from None
            pause_s = lock_wait.backoff_s(attempt)
            logger.warning(
                "the migration waited %g s for a table's lock held by another transaction and rolled back; "
                "trying again in %g s (try %d of %d)",
                lock_wait.timeout_s,
                pause_s,
                attempt + 1,
                lock_wait.attempts,
            )
            time.sleep(pause_s)
        else:
            return


def _newer_schema(config: Config, error: CommandError) -> Exception:
    """The refusal of a database a newer release migrated (alembic: "Can't locate revision"), else `error`.

    Migrations only go forward: an older release re-deployed (a rollback) cannot read what a newer one
    wrote, and said so in a 120-line traceback naming only the unknown revision.
    """
    message = str(error)
    if not message.startswith("Can't locate revision"):
        return error
    revision = message.rsplit(" ", 1)[-1].strip("'")
    return ConfigurationError(_newer_schema_message(revision, ScriptDirectory.from_config(config).get_current_head()))


def _newer_schema_message(revision: str, head: str | None) -> str:
    return (
        f"the database's schema is at revision {revision}, which this release does not know (its newest is "
        f"{head}): a newer release migrated it, and schemas are never downgraded; run that release or a newer one"
    )


# Whether alembic's table exists and this role may read it: a role without the grant (one a release before
# the grant prepared) must not be refused for what it cannot see.
SCHEMA_REVISION_READABLE = (
    "SELECT to_regclass('alembic_version') IS NOT NULL, "
    "to_regclass('alembic_version') IS NOT NULL AND has_table_privilege('alembic_version', 'SELECT')"
)


async def check_schema_revision(engine: AsyncEngine) -> bool:
    """Check the schema's revision at start: refuse (one line) an older one, warn of a newer one; False when none.

    For a database the service does not migrate itself (`DATABASE_URL`: the migrations Job does). A schema
    an older release migrated (the Job skipped or failed) served until a request met a missing column, and
    writes left new columns unset. A database not migrated at all is not refused: a first install with the
    chart's own database migrates after its pods are ready (a `post-install` Job), and their requests fail
    until it has. A schema a newer release migrated is served with a WARNING: that is a rollback, which
    works while the newer migrations only added what this release does without (docs/operations.md,
    "Rolling back across a migration"); refused, every pod of the rollback crash-looped. True when a
    schema is there (also when this role may not read its revision: nothing is checked then).
    """
    with translate_errors(engine="postgresql"):
        async with engine.connect() as connection:
            present, readable = (await connection.execute(text(SCHEMA_REVISION_READABLE))).one()
            if present and not readable:
                logger.warning("the schema's revision is not checked: this role may not read alembic_version")
            if not readable:
                return bool(present)
            revisions = (await connection.execute(text("SELECT version_num FROM alembic_version"))).scalars().all()
    if len(revisions) > 1:
        listed = ", ".join(sorted(revisions))
        msg = f"alembic_version holds {len(revisions)} revisions ({listed}); these migrations keep one"
        raise ConfigurationError(msg)
    script = ScriptDirectory(str(migrations_dir()))
    head = script.get_current_head()
    if not revisions:
        return False
    revision = revisions[0]
    if revision == head:
        return True
    if revision not in {known.revision for known in script.walk_revisions()}:
        logger.warning(
            "the database's schema is at revision %s, newer than this release's %s: a newer release migrated it "
            "(a rollback); serving it, which works while the newer migrations only added what this release does "
            "without (docs/operations.md, 'Rolling back across a migration')",
            revision,
            head,
        )
        return True
    message = (
        f"the database's schema is at revision {revision} and this release needs {head}: run `poimen migrate` "
        "of this release against it (the chart's migrations Job does on install and upgrade)"
    )
    raise ConfigurationError(message)


async def stored_embedding_dimensions(database_url: str) -> int:
    """The dimension of `chunks.embedding` as created (pgvector keeps it in the column's typmod)."""
    engine = create_asyncpg_engine(database_url)
    try:
        async with engine.connect() as connection:
            result = await connection.execute(
                text(
                    "SELECT atttypmod FROM pg_attribute "
                    "WHERE attrelid = 'chunks'::regclass AND attname = 'embedding' AND NOT attisdropped"
                )
            )
            return int(result.scalar_one())
    finally:
        await engine.dispose()
