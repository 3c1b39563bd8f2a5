"""A session left inside a transaction (a frozen or cut-off replica) loses its locks, on the real PostgreSQL.

The outbox skips rows another session holds, and writers of a document wait for its lock: a replica that
stopped mid-transaction held them until TCP noticed (hours). `create_postgres_engine` asks the server to
end such a session after `idle_transaction_timeout_s`.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from sqlalchemy import text

from app.engines.pgvector import create_postgres_engine
from app.engines.postgres_roles import ensure_runtime_role

LOCK_KEY = 7_340_017
RELEASE_TIMEOUT_S = 30.0


async def test_a_session_idle_inside_a_transaction_is_ended_and_its_locks_released(migrated_postgres_url) -> None:
    url = await ensure_runtime_role(migrated_postgres_url)
    frozen = create_postgres_engine(url, pool_size=1, idle_transaction_timeout_s=0.5)
    other = create_postgres_engine(url, pool_size=1)
    try:
        async with frozen.connect() as holder:
            await holder.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": LOCK_KEY})
            # The holder now sends nothing, as a process stopped between two statements would.
            taken = False
            deadline = time.monotonic() + RELEASE_TIMEOUT_S
            async with other.connect() as waiter:
                while not taken and time.monotonic() < deadline:
                    taken = (
                        await waiter.execute(text("SELECT pg_try_advisory_xact_lock(:key)"), {"key": LOCK_KEY})
                    ).scalar_one()
                    await waiter.rollback()
                    if not taken:
                        await asyncio.sleep(0.2)
            with pytest.raises(Exception, match=r"idle-in-transaction|terminat|closed"):
                await holder.execute(text("SELECT 1"))
        assert taken, "the lock of a session idle in its transaction was never released"
    finally:
        await frozen.dispose()
        await other.dispose()


async def test_sessions_of_the_service_carry_the_timeout_and_keepalives(migrated_postgres_url) -> None:
    engine = create_postgres_engine(await ensure_runtime_role(migrated_postgres_url), idle_transaction_timeout_s=120)
    try:
        async with engine.connect() as connection:
            settings = {
                name: (await connection.execute(text(f"SHOW {name}"))).scalar_one()
                for name in ("idle_in_transaction_session_timeout", "tcp_keepalives_idle")
            }
    finally:
        await engine.dispose()

    assert settings["idle_in_transaction_session_timeout"] == "2min"
    assert settings["tcp_keepalives_idle"] in {"1min", "0"}  # 0 on a unix socket, where keepalives do not apply
