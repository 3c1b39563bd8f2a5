"""`poimen migrate` beside a long transaction: bounded lock waits, retries, and a one-line refusal naming the holder.

A database at revision 0007, so the run has an `ALTER TABLE chunks` to do (0008), and a second session in an
open transaction that read `chunks` (an ACCESS SHARE lock, as any idle-in-transaction client holds).
"""

from __future__ import annotations

import asyncio
import os
import select
import subprocess
import sys
import uuid
from typing import TYPE_CHECKING

import pytest
from alembic import command
from sqlalchemy import make_url, text
from sqlalchemy.ext.asyncio import create_async_engine

from app.domain.errors import EngineTimeoutError
from app.engines.migrate import alembic_config, run_migrations
from app.engines.migration_locks import LockWait

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from sqlalchemy.ext.asyncio import AsyncConnection

pytestmark = pytest.mark.integration

GUARD_S = 120.0
"""A hung migration fails the test instead of hanging the session (no assertion on time)."""


def create_database_at_0007(postgres_url: str, *, c_locale: bool = False) -> str:
    """A new database on the session's server, migrated to 0007; "C" as CloudNativePG creates them, if asked."""
    name = f"locks_{uuid.uuid4().hex[:8]}"
    locale = " TEMPLATE template0 LC_COLLATE 'C' LC_CTYPE 'C'" if c_locale else ""

    async def create() -> None:
        engine = create_async_engine(postgres_url, isolation_level="AUTOCOMMIT")
        try:
            async with engine.connect() as connection:
                await connection.execute(text(f'CREATE DATABASE "{name}"{locale}'))
        finally:
            await engine.dispose()

    asyncio.run(create())
    url = make_url(postgres_url).set(database=name).render_as_string(hide_password=False)
    command.upgrade(alembic_config(url, embedding_dimensions=384), "0007")
    return url


@pytest.fixture
def database_at_0007(postgres_url: str) -> str:
    return create_database_at_0007(postgres_url)


@pytest.fixture
async def long_transaction(database_at_0007: str) -> AsyncIterator[AsyncConnection]:
    """A session in an open transaction that has read `chunks`; its pid is `info["pid"]`."""
    engine = create_async_engine(database_at_0007)
    async with engine.connect() as connection:
        await connection.execute(text("SELECT count(*) FROM chunks"))
        connection.info["pid"] = (await connection.execute(text("SELECT pg_backend_pid()"))).scalar_one()
        yield connection
        await connection.rollback()
    await engine.dispose()


def migrate_command(database_url: str, data_dir: Path, **settings: str) -> tuple[list[str], dict[str, str]]:
    environment = {**os.environ, "DATABASE_URL": database_url, "POIMEN_DATA_DIR": str(data_dir), **settings}
    return [sys.executable, "-m", "app", "migrate"], environment


async def revision(database_url: str) -> str:
    engine = create_async_engine(database_url)
    try:
        async with engine.connect() as connection:
            return str((await connection.execute(text("SELECT version_num FROM alembic_version"))).scalar_one())
    finally:
        await engine.dispose()


async def test_migrate_behind_a_long_transaction_gives_up_in_one_line_naming_it(
    database_at_0007: str, long_transaction: AsyncConnection, tmp_path: Path
) -> None:
    # Before: the ALTER TABLE waited for the transaction with no limit (and every query of chunks behind it).
    arguments, environment = migrate_command(
        database_at_0007, tmp_path, MIGRATION_LOCK_TIMEOUT_S="0.2", MIGRATION_LOCK_ATTEMPTS="2"
    )

    result = await asyncio.to_thread(
        subprocess.run, arguments, env=environment, capture_output=True, text=True, timeout=GUARD_S, check=False
    )

    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    refusal = result.stderr.strip().splitlines()[-1]
    assert refusal.startswith("poimen migrate: a table the migration alters stayed locked"), refusal
    assert f"pid {long_transaction.info['pid']} " in refusal
    assert "on chunks" in refusal
    assert await revision(database_at_0007) == "0007"


async def test_migrate_tries_again_and_succeeds_once_the_long_transaction_ends(
    database_at_0007: str, long_transaction: AsyncConnection, tmp_path: Path
) -> None:
    arguments, environment = migrate_command(
        database_at_0007, tmp_path, MIGRATION_LOCK_TIMEOUT_S="0.2", MIGRATION_LOCK_ATTEMPTS="50"
    )
    with subprocess.Popen(arguments, env=environment, stderr=subprocess.PIPE, text=True) as process:
        try:
            first_lines = await asyncio.to_thread(read_until, process, "trying again")
            await long_transaction.rollback()
            remaining = (await asyncio.to_thread(process.communicate, timeout=GUARD_S))[1]
        finally:
            process.kill()

    assert process.returncode == 0, first_lines + remaining
    assert "schema at head" in remaining
    assert await revision(database_at_0007) != "0007"


def read_until(process: subprocess.Popen[str], marker: str) -> str:
    """The process's stderr up to and including the first line holding `marker`."""
    assert process.stderr is not None
    lines = []
    while True:
        ready, _, _ = select.select([process.stderr], [], [], GUARD_S)
        line = process.stderr.readline() if ready else ""
        if not line:
            pytest.fail(f"no line with {marker!r} before the migration ended or stalled: {''.join(lines)}")
        lines.append(line)
        if marker in line:
            return "".join(lines)


def test_the_backoff_doubles_up_to_its_ceiling() -> None:
    wait = LockWait(timeout_s=5.0, attempts=8, first_backoff_s=1.0, max_backoff_s=6.0)

    pauses = [wait.backoff_s(failed) for failed in range(1, 6)]

    assert pauses == [1.0, 2.0, 4.0, 6.0, 6.0]
    assert wait.lock_timeout_setting == "5000ms"


CHUNK_ROWS = (
    "INSERT INTO chunks (project_id, chunk_id, document_id, text, source, level, section_title, position, tags, "
    "chunk_hash, embedding, embedding_model) SELECT 'p', 'c' || i, 'd1', 'x', 's', 'L0', '', 0, CAST(:tags AS text[]), "
    "'h', CAST(array_fill(0.1, ARRAY[384]) AS vector), 'm' FROM generate_series(1, :rows) AS i"
)
DOCUMENT_ROWS = (
    "INSERT INTO documents (project_id, document_id, source, title, content_hash, tags) "
    "SELECT :project, 'd' || i, 's', 't', 'h', CAST(:tags AS text[]) FROM generate_series(1, :rows) AS i"
)
FILL_HELD = 4_242_001
"""Advisory lock the test holds; a trigger makes each update of a chunk wait for it (the fill, held midway)."""
HOLD_FILL_FUNCTION = (
    "CREATE FUNCTION hold_fill() RETURNS trigger LANGUAGE plpgsql AS "
    f"$$ BEGIN PERFORM pg_advisory_lock({FILL_HELD}); PERFORM pg_advisory_unlock({FILL_HELD}); RETURN NEW; END $$"
)
KEYS_BY_PROJECT = (
    "SELECT project_id, array_to_string(ARRAY(SELECT unnest(tag_keys) ORDER BY 1), ','), count(*) "
    "FROM documents GROUP BY 1, 2 ORDER BY 1, 2"
)


async def execute_all(url: str, *statements: tuple[str, dict[str, object]]) -> list[list[tuple[object, ...]]]:
    """Run `statements` in one transaction under the maintenance scope; each one's rows."""
    engine = create_async_engine(url)
    try:
        async with engine.begin() as connection:
            await connection.execute(text("SELECT set_config('poimen.scope', 'all_projects', true)"))
            results = [await connection.execute(text(sql), parameters) for sql, parameters in statements]
            return [[tuple(row) for row in result.all()] if result.returns_rows else [] for result in results]
    finally:
        await engine.dispose()


async def test_migration_0008_fills_the_keys_while_reads_of_chunks_go_on(postgres_url: str) -> None:
    # Before: 0008 added tag_keys (ACCESS EXCLUSIVE) and filled it in the migrations' one transaction, so every
    # query of chunks waited for the whole fill (about 650 rewritten rows/s on a "C" database).
    url = await asyncio.to_thread(create_database_at_0007, postgres_url, c_locale=True)
    await execute_all(
        url,
        (DOCUMENT_ROWS, {"project": "p", "tags": [], "rows": 1}),
        (CHUNK_ROWS, {"tags": ["École", "ops"], "rows": 3}),
        (HOLD_FILL_FUNCTION, {}),
        ("CREATE TRIGGER hold_fill BEFORE UPDATE ON chunks FOR EACH ROW EXECUTE FUNCTION hold_fill()", {}),
    )
    holder_engine, reader_engine = create_async_engine(url), create_async_engine(url)
    holder = await holder_engine.connect()
    await holder.execute(text("SELECT pg_advisory_lock(:key)"), {"key": FILL_HELD})
    await holder.commit()  # the session's lock stays; the holder's transaction touched no table
    migration = asyncio.create_task(
        asyncio.to_thread(command.upgrade, alembic_config(url, embedding_dimensions=384), "head")
    )
    try:
        await wait_for_a_waiter_on(holder, FILL_HELD)
        async with reader_engine.connect() as reader:
            await reader.execute(text(f"SET statement_timeout = '{GUARD_S}s'"))
            await reader.execute(text("SELECT set_config('poimen.scope', 'all_projects', false)"))

            counted = (await reader.execute(text("SELECT count(*) FROM chunks"))).scalar_one()
    finally:
        await holder.execute(text("SELECT pg_advisory_unlock_all()"))
        await holder.close()
        await asyncio.wait_for(migration, GUARD_S)
        await holder_engine.dispose()
        await reader_engine.dispose()
    keys = await execute_all(url, ("SELECT DISTINCT tag_keys FROM chunks", {}))

    assert counted == 3
    assert [sorted(row[0]) for row in keys[0]] == [["ops", "école"]]  # type: ignore[arg-type]


async def wait_for_a_waiter_on(connection: AsyncConnection, advisory_key: int) -> None:
    """Return once another session waits for the advisory lock `advisory_key` (polled, up to `GUARD_S`)."""
    waiting = text(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
        "AND (classid::bigint << 32 | objid::bigint) = :key"
    )
    for _ in range(int(GUARD_S * 20)):
        if (await connection.execute(waiting, {"key": advisory_key})).scalar_one():
            await connection.commit()
            return
        await connection.commit()
        await asyncio.sleep(0.05)
    pytest.fail("the migration never reached the fill")


async def test_migration_0008_keys_every_row_across_its_batches(postgres_url: str) -> None:
    url = await asyncio.to_thread(create_database_at_0007, postgres_url, c_locale=True)
    await execute_all(
        url,
        (DOCUMENT_ROWS, {"project": "a", "tags": ["École"], "rows": 1500}),
        (DOCUMENT_ROWS, {"project": "b", "tags": ["Ops", "École"], "rows": 1200}),
        (DOCUMENT_ROWS, {"project": "c", "tags": ["ops"], "rows": 10}),
    )

    await asyncio.to_thread(command.upgrade, alembic_config(url, embedding_dimensions=384), "head")

    counts = await execute_all(url, (KEYS_BY_PROJECT, {}))
    assert counts[0] == [("a", "école", 1500), ("b", "ops,école", 1200), ("c", "", 10)]  # unkeyed: read as lower(tags)


async def test_a_migration_stopped_during_0008s_fill_resumes_to_the_same_keys(postgres_url: str) -> None:
    # The fill runs after 0008's columns are committed: a run stopped there (here: its lock wait timed out, as
    # the session's lock_timeout still bounds it) leaves revision 0007 with the columns, and the next run
    # must add them only if missing and key every row.
    url = await asyncio.to_thread(create_database_at_0007, postgres_url, c_locale=True)
    await execute_all(
        url,
        (DOCUMENT_ROWS, {"project": "p", "tags": [], "rows": 1}),
        (CHUNK_ROWS, {"tags": ["École", "ops"], "rows": 3}),
        (HOLD_FILL_FUNCTION, {}),
        ("CREATE TRIGGER hold_fill BEFORE UPDATE ON chunks FOR EACH ROW EXECUTE FUNCTION hold_fill()", {}),
    )
    holder_engine = create_async_engine(url)
    holder = await holder_engine.connect()
    await holder.execute(text("SELECT pg_advisory_lock(:key)"), {"key": FILL_HELD})
    await holder.commit()
    stopped = LockWait(timeout_s=0.2, attempts=1)
    try:
        with pytest.raises(EngineTimeoutError):
            await asyncio.to_thread(run_migrations, url, embedding_dimensions=384, lock_wait=stopped)
    finally:
        await holder.execute(text("SELECT pg_advisory_unlock_all()"))
        await holder.close()
        await holder_engine.dispose()
    stopped_at = await revision(url)

    await asyncio.to_thread(run_migrations, url, embedding_dimensions=384)

    keys = await execute_all(url, ("SELECT DISTINCT tag_keys FROM chunks", {}))
    assert stopped_at == "0007"
    assert await revision(url) != "0007"
    assert [sorted(row[0]) for row in keys[0]] == [["ops", "école"]]  # type: ignore[arg-type]
