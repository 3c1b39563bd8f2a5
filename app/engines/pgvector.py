"""The vector leg on PostgreSQL: `PgVectorIndex` (HNSW cosine search) and the shared `AsyncEngine` factory.

One SQLAlchemy `AsyncEngine` (asyncpg) serves this index and `PostgresDocumentStore`; the app lifespan
owns and disposes it. The search itself runs on the pooled asyncpg connection directly
(`app.engines.postgres_driver`): it is the one read every query makes. Driver errors become
`EngineError`s in `app.engines.postgres_errors.translate_errors()`.
"""

from __future__ import annotations

import time
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from sqlalchemy import text
from sqlalchemy.pool import QueuePool

from app.domain.errors import EngineTimeoutError, EngineUnavailableError
from app.domain.models import ScoredHit
from app.domain.recent_reads import RecentReads
from app.engines.chunk_codec import chunk_from_record
from app.engines.pgvector_read import PgVectorRead, opens_ahead
from app.engines.postgres_connect import create_asyncpg_engine
from app.engines.postgres_driver import fetch
from app.engines.postgres_errors import translate_errors
from app.engines.postgres_rows import vector_literal
from app.engines.postgres_sql import (
    SELECT_PROJECT_SIZE,
    SESSIONS_PRESET,
    SET_LOCAL_HNSW,
    exact_search_excluding_sql,
    exact_search_sql,
    exclusion_sql,
    filter_sql,
    nearest_search_sql,
)
from app.engines.vector_plan import exact_scan_limit, prefers_exact_scan

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence
    from contextlib import AbstractAsyncContextManager

    import asyncpg
    from sqlalchemy.ext.asyncio import AsyncEngine
    from sqlalchemy.pool import Pool

    from app.domain.models import Filters
    from app.domain.ports import VectorRead

VECTOR_ENGINE: Final = "pgvector"
MAX_HNSW_EF_SEARCH: Final = 1000
"""pgvector's upper bound for `hnsw.ef_search`."""


PROJECT_SIZE_TTL_S: Final = 60.0
"""How long a replica trusts a project's row count when choosing its plan (both plans are correct; a stale
count only picks the slower one until the next count)."""
PROJECT_SIZES_KEPT: Final = 4096
"""Projects whose counts one replica keeps; the oldest is forgotten past this."""
COUNT_TABLE_ROWS_FLOOR: Final = 1_000_000.0
"""The table size the count limit assumes at least: PostgreSQL's estimate lags a bulk ingest until the next
ANALYZE, so a project is counted far enough to see that it outgrew the exact scan all the same."""

TCP_KEEPALIVES: Final = {"tcp_keepalives_idle": "60", "tcp_keepalives_interval": "10", "tcp_keepalives_count": "6"}
"""The server's probes of a silent client: a peer gone without a word is dropped after about two minutes."""
POOL_RECYCLE_S: Final = 300
"""Seconds a pooled connection is used before it is replaced (see `create_postgres_engine`)."""


def create_postgres_engine(  # noqa: PLR0913 - keyword-only options, each with a default
    url: str,
    *,
    pool_size: int = 16,
    connect_timeout_s: float = 5.0,
    command_timeout_s: float | None = None,
    hnsw_ef_search: int = 100,
    idle_transaction_timeout_s: float | None = None,
) -> AsyncEngine:
    """An asyncpg `AsyncEngine` for both adapters; the caller disposes it (`await engine.dispose()`).

    `idle_transaction_timeout_s`: PostgreSQL ends a session left inside a transaction, between statements,
    longer than this (`idle_in_transaction_session_timeout`), and with it the locks it holds. A replica
    frozen or cut off inside a transaction (an outbox claim, a document's write lock) otherwise held its
    locks until TCP noticed, about two hours: the outbox skipped those rows and writes of that project
    waited. Dead peers over TCP are noticed within about two minutes (keepalives). None: the server's own.

    `url` may be `postgresql://` (as `DATABASE_URL` usually is) or `postgresql+asyncpg://`, with libpq's
    query parameters (`sslmode`, `sslrootcert`, ...: `create_asyncpg_engine`).
    Connections are not pinged before use: asyncpg's ping is a transaction of its own (three round trips
    before every transaction, ~4 % of the serving loop's time at 16 clients, py-spy). A connection
    found dead fails its one call (the search degrades to its lexical leg, an ingest answers 503 with
    `Retry-After`), and SQLAlchemy then invalidates the whole pool, so every later checkout connects
    afresh; connections are also replaced after `POOL_RECYCLE_S`, before idle-timeouts in between
    (proxies, firewalls) cut them. At most `pool_size` connections, no overflow: SQLAlchemy closes an
    overflow connection when it comes back, so under steady load past the pool every few searches paid
    for a new PostgreSQL backend (183 connections in 10 s at 16 clients; docs/benchmarks/connection-pool.md).
    Every session starts with pgvector's iterative scan on and `hnsw.ef_search = hnsw_ef_search`, so
    a vector search is one statement with no SET round trips (`PgVectorIndex` checks this once).
    """
    connect_args: dict[str, Any] = {
        "timeout": connect_timeout_s,
        # JIT compilation costs more than it saves on short index-driven queries.
        "server_settings": {
            "application_name": "poimen-memory",
            "jit": "off",
            "hnsw.iterative_scan": "relaxed_order",
            "hnsw.ef_search": str(min(hnsw_ef_search, MAX_HNSW_EF_SEARCH)),
            **TCP_KEEPALIVES,
        },
    }
    if idle_transaction_timeout_s is not None:
        milliseconds = max(1, round(idle_transaction_timeout_s * 1000))
        connect_args["server_settings"]["idle_in_transaction_session_timeout"] = str(milliseconds)
    if command_timeout_s is not None:
        connect_args["command_timeout"] = command_timeout_s
    return create_asyncpg_engine(
        url,
        pool_size=pool_size,
        max_overflow=0,
        pool_pre_ping=False,
        pool_recycle=POOL_RECYCLE_S,
        pool_timeout=connect_timeout_s,
        connect_args=connect_args,
    )


WRITER_SHARE_OF_POOL: Final = 4
"""A quarter of the pool's connections at most hold document locks: each block needs two at a time, so
writes use at most half the pool and searches always find the other half (from a pool of 4 up; below it, the one
writer allowed may hold every connection while it writes)."""


def writers_at_once(pool: Pool) -> int:
    """How many `lock_documents` blocks one process runs at once over `pool` (one for a pool without a size)."""
    size = pool.size() if isinstance(pool, QueuePool) else 0
    return max(1, size // WRITER_SHARE_OF_POOL)


@dataclass(frozen=True, slots=True)
class _ProjectSize:
    project_rows: int
    table_rows: float
    counted_all: bool


class PgVectorIndex:
    """`VectorIndex` over `chunks.embedding`: HNSW cosine search with every filter applied in SQL.

    Filtered queries use pgvector 0.8 iterative index scans (relaxed order, re-sorted here), so they
    still fill `top_k` when the filter is selective. A project small for its share of the table
    (`app.engines.vector_plan`), and any search with `filters.chunk_ids`, is ranked exactly instead:
    its rows are read and sorted by distance, no index. `score` is cosine similarity,
    `1 - cosine distance`, in [-1, 1].
    """

    name = VECTOR_ENGINE

    def __init__(self, engine: AsyncEngine, *, ef_search: int = 100) -> None:
        self._engine = engine
        self._ef_search = ef_search
        self._reads_open = 0  # this index's reads now, for `opens_ahead`
        self._sessions_preset: bool | None = None  # learnt on first search
        self._sizes: RecentReads[str, _ProjectSize] = RecentReads(ttl_s=PROJECT_SIZE_TTL_S, max_keys=PROJECT_SIZES_KEPT)

    async def _uses_preset_sessions(self) -> bool:
        """Whether the engine's sessions already carry our HNSW settings (`create_postgres_engine` sets them)."""
        if self._sessions_preset is None:
            async with self._engine.connect() as connection:
                result = await connection.execute(text(SESSIONS_PRESET), {"ef_search": self._ef_search})
                self._sessions_preset = bool(result.scalar_one())
                await connection.rollback()
        return self._sessions_preset

    async def search(self, embedding: Sequence[float], *, top_k: int, filters: Filters) -> list[ScoredHit]:
        """Return at most `top_k` chunks matching `filters`, best first (ties by chunk id)."""
        if top_k <= 0 or filters.chunk_ids == ():
            return []
        async with self.read(filters.project_id) as read:
            return await read.search(embedding, top_k=top_k, filters=filters)

    def read(self, project_id: str) -> AbstractAsyncContextManager[VectorRead]:
        """A read-only transaction scoped to the project (`ConfirmingVectorIndex.read`), rolled back at exit.

        It begins at entry while few reads are open and fewer than half the pool's connections are in use
        (`opens_ahead`), else at its first call: begun ahead, it overlaps its round trips with the query's
        embedding, which only pays while a core is idle, and holds its connection through the embedding, which
        under load would keep other searches from theirs.
        """
        return self._read(project_id)

    @asynccontextmanager
    async def _read(self, project_id: str) -> AsyncIterator[VectorRead]:
        with translate_errors(engine=self.name):
            preset = await self._uses_preset_sessions()
            read = PgVectorRead(
                self._engine, project_id, engine_name=self.name, search_in=self._search_in, sessions_preset=preset
            )
            self._reads_open += 1
            try:
                if opens_ahead(self._engine.pool, reads_open=self._reads_open):
                    await read.begin()
                yield read
            except BaseException:
                await read.end(failed=True)
                raise
            finally:
                self._reads_open -= 1
            await read.end(failed=False)

    async def _search_in(
        self, connection: asyncpg.Connection, embedding: Sequence[float], *, top_k: int, filters: Filters, preset: bool
    ) -> list[ScoredHit]:
        """The search's statements in the caller's transaction (`preset`: the sessions carry our HNSW settings)."""
        if top_k <= 0 or filters.chunk_ids == ():
            return []
        parameters: dict[str, object] = {"embedding": vector_literal(embedding), "top_k": top_k}
        where = filter_sql(filters, parameters)
        ef_search = min(max(self._ef_search, top_k), MAX_HNSW_EF_SEARCH)
        exact = filters.chunk_ids is not None or await self._reads_exactly(
            connection, filters.project_id, ef_search=ef_search
        )
        # The sessions' own HNSW settings usually suffice: no SET LOCAL of them then.
        if not (exact or (preset and top_k <= self._ef_search)):
            await fetch(connection, SET_LOCAL_HNSW, {"ef_search": str(ef_search)})
        statement = _exact_search_sql(filters, parameters) if exact else nearest_search_sql(where)
        rows = await fetch(connection, statement, parameters)
        return [ScoredHit(chunk=chunk_from_record(row), score=1.0 - float(row["distance"])) for row in rows]

    async def _reads_exactly(self, connection: asyncpg.Connection, project_id: str, *, ef_search: int) -> bool:
        """Whether the project's rows are cheaper to rank exactly than by the graph, from a recent count."""
        now = time.monotonic()
        size = self._sizes.fresh(project_id, now)
        if size is None:
            last = self._sizes.last(project_id)
            self._sizes.hold(project_id, now)  # searches running meanwhile keep the last count
            table_rows = COUNT_TABLE_ROWS_FLOOR if last is None else max(COUNT_TABLE_ROWS_FLOOR, last.table_rows)
            count_limit = exact_scan_limit(table_rows=table_rows, ef_search=ef_search) + 1
            # Counted in the search's own transaction: row-level security shows it the project's rows only.
            counting = {"project_id": project_id, "count_limit": count_limit}
            (row,) = await fetch(connection, SELECT_PROJECT_SIZE, counting)
            project_rows = int(row["project_rows"])
            # A count that reached its limit only says "at least": the graph, until a count says otherwise.
            size = _ProjectSize(project_rows, float(row["table_rows"]), counted_all=project_rows < count_limit)
            self._sizes.store(project_id, size, now)
        return size.counted_all and prefers_exact_scan(
            project_rows=size.project_rows, table_rows=size.table_rows, ef_search=ef_search
        )

    async def ping(self) -> None:
        """Return when PostgreSQL answers; raise `EngineUnavailableError` otherwise."""
        await ping_database(self._engine, name=self.name)


async def ping_database(engine: AsyncEngine, *, name: str) -> None:
    """`SELECT 1`; a timeout also counts as unavailable, as the ports' `ping` contract says."""
    try:
        with translate_errors(engine=name):
            async with engine.connect() as connection:
                await connection.execute(text("SELECT 1"))
    except EngineTimeoutError as error:
        raise EngineUnavailableError(error.message, engine=name) from error


def _exact_search_sql(filters: Filters, parameters: dict[str, object]) -> str:
    """The exact scan's statement: excluded terms, when there are any, checked nearest first (they cost)."""
    exclusion = exclusion_sql(filters, parameters)
    if exclusion is None:
        return exact_search_sql(filter_sql(filters, parameters))
    return exact_search_excluding_sql(filter_sql(filters, parameters, exclusions=False), exclusion)
