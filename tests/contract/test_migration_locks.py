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

from app.engines.migrate import alembic_config
from app.engines.migration_locks import LockWait

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from sqlalchemy.ext.asyncio import AsyncConnection

pytestmark = pytest.mark.integration

GUARD_S = 120.0
"""A hung migration fails the test instead of hanging the session (no assertion on time)."""


@pytest.fixture
def database_at_0007(postgres_url: str) -> str:
    name = f"locks_{uuid.uuid4().hex[:8]}"

    async def create() -> None:
        engine = create_async_engine(postgres_url, isolation_level="AUTOCOMMIT")
        try:
            async with engine.connect() as connection:
                await connection.execute(text(f'CREATE DATABASE "{name}"'))
        finally:
            await engine.dispose()

    asyncio.run(create())
    url = make_url(postgres_url).set(database=name).render_as_string(hide_password=False)
    command.upgrade(alembic_config(url, embedding_dimensions=384), "0007")
    return url


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
    assert refusal.startswith("migrate failed: a table the migration alters stayed locked"), refusal
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
