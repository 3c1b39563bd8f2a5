"""The per-query reads on the driver's own connection: asyncpg under SQLAlchemy's pool, no SQLAlchemy in between.

Every search reads the vector leg (and confirms the lexical leg's hits) in one project-scoped
transaction; a lexical-only search confirms its hits, and the query cache reads the project's
generation. These are the reads made on every query, so they run here. Through SQLAlchemy's async layer
the vector read cost about 1.5 ms of the serving process's CPU per query, 50 hits decoded (greenlet
hand-offs, result processing, per-statement bookkeeping); on the pool's asyncpg connection itself the
same statements cost about 0.9 ms (a 400-search probe; under 16 clients the server's CPU per query fell
by about 0.6 ms, docs/benchmarks/threads.md). Everything else keeps SQLAlchemy: it does not run on every
query.

The connection still comes from, and goes back to, SQLAlchemy's pool (one pool, one connection
budget). What SQLAlchemy would otherwise do for us is done here: the transaction always ends before
the connection goes back, and a connection that may be broken or busy (a lost connection, a cancelled
or timed-out statement) is invalidated instead of returned. The scope is the one
`app.engines.postgres_scope` sets, with the same statement.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from sqlalchemy import text
from sqlalchemy.dialects.postgresql.asyncpg import dialect as asyncpg_dialect

from app.engines.postgres_scope import SET_LOCAL_PROJECTS

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterable, Mapping

    import asyncpg
    from sqlalchemy.ext.asyncio import AsyncEngine

_DIALECT = asyncpg_dialect()  # type: ignore[no-untyped-call] # SQLAlchemy's dialect classes are untyped


@lru_cache(maxsize=256)
def positional_statement(statement: str) -> tuple[str, tuple[str, ...]]:
    """`statement` with `:name` parameters in asyncpg's `$n` form, and the names in `$n` order.

    Compiled by SQLAlchemy's own asyncpg dialect, so a name used twice is one `$n` and `::` casts stay
    as they are. Cached: each combination of filters is one statement text (`filter_sql`).
    """
    compiled = text(statement).compile(dialect=_DIALECT)
    return str(compiled), tuple(compiled.positiontup or ())


async def fetch(connection: asyncpg.Connection, statement: str, parameters: Mapping[str, object]) -> list[Any]:
    """The rows (asyncpg `Record`s: mappings by column name) of `statement` with named `parameters`."""
    positional, names = positional_statement(statement)
    rows: list[Any] = await connection.fetch(positional, *(parameters[name] for name in names))
    return rows


@asynccontextmanager
async def pooled_driver(engine: AsyncEngine) -> AsyncIterator[asyncpg.Connection]:
    """A pooled asyncpg connection, outside any transaction (each statement commits on its own).

    On any error, or a cancellation, the connection is invalidated (closed and replaced in the pool):
    it may be gone, still busy with a cancelled statement, or inside a transaction the caller began.
    """
    async with engine.connect() as pooled:
        driver: asyncpg.Connection = (await pooled.get_raw_connection()).driver_connection
        try:
            yield driver
        except BaseException:
            await pooled.invalidate()
            raise


@asynccontextmanager
async def project_read(engine: AsyncEngine, project_ids: Iterable[str]) -> AsyncIterator[asyncpg.Connection]:
    """A read-only transaction on a pooled asyncpg connection that sees only the rows of `project_ids`.

    `project_transaction`'s read, on the driver: rolled back at the end, so nothing it did outlives it,
    and the connection is invalidated on any error (`pooled_driver`).
    """
    async with pooled_driver(engine) as driver:
        transaction = driver.transaction(readonly=True)  # raises at once on a connection found closed
        await transaction.start()
        await fetch(driver, SET_LOCAL_PROJECTS, {"projects": sorted(set(project_ids))})
        yield driver
        await transaction.rollback()
