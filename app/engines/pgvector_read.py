"""A pgvector search's read of PostgreSQL: one project's snapshot for its vector search and its confirmations.

`PgVectorIndex.read` hands one out (`VectorRead`): a read-only transaction scoped to the project on the driver's
connection (`app.engines.postgres_driver.project_read`), so that a search can begin it while the query is still
embedded and confirm the lexical hits in it meanwhile (`app.retrieval.leg_runs.LegRunner.read_ahead`).
`select_existing_chunks` is that confirmation, which the document store also answers on its own.
"""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack, contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Final, Protocol

from sqlalchemy.pool import QueuePool

from app.domain.errors import EngineUnavailableError
from app.engines.postgres_driver import fetch, project_read
from app.engines.postgres_errors import translate_errors
from app.engines.postgres_sql import filter_sql

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    import asyncpg
    from sqlalchemy.ext.asyncio import AsyncEngine
    from sqlalchemy.pool import Pool

    from app.domain.models import Filters, ScoredHit


class SearchIn(Protocol):
    """The vector search's statements on a connection already in the read's transaction."""

    async def __call__(
        self, connection: asyncpg.Connection, embedding: Sequence[float], *, top_k: int, filters: Filters, preset: bool
    ) -> list[ScoredHit]:
        """Return the search's hits; `preset`: the sessions already carry the index's HNSW settings."""
        ...


class PgVectorRead:
    """`VectorRead` on one pooled connection inside `project_read`'s transaction: calls take turns on it.

    The transaction begins at `begin` or at the first call, whichever comes first, and ends at `end`.
    """

    def __init__(
        self, engine: AsyncEngine, project_id: str, *, engine_name: str, search_in: SearchIn, sessions_preset: bool
    ) -> None:
        self._engine = engine
        self._engine_name = engine_name
        self._search_in = search_in
        self._project_id = project_id
        self._sessions_preset = sessions_preset
        self._transaction = AsyncExitStack()
        self._connection: asyncpg.Connection | None = None
        self._turn = asyncio.Lock()  # asyncpg runs one statement at a time on a connection
        # A statement that failed or was cut off (a deadline, a cancellation) leaves the transaction or the
        # connection unusable: later calls fail at once, and the connection is dropped instead of reused.
        self._interrupted = False

    @property
    def began(self) -> bool:
        """Whether the transaction has begun (at `begin` or at a first call)."""
        return self._connection is not None

    async def begin(self) -> None:
        """Begin the transaction now rather than at the first call."""
        async with self._turn:
            with self._guarded():
                await self._connected()

    async def search(self, embedding: Sequence[float], *, top_k: int, filters: Filters) -> list[ScoredHit]:
        """`VectorIndex.search` in this transaction."""
        self._check_project(filters.project_id)
        async with self._turn:
            with self._guarded():
                return await self._search_in(
                    await self._connected(), embedding, top_k=top_k, filters=filters, preset=self._sessions_preset
                )

    async def existing_chunks(
        self, project_id: str, chunk_ids: Sequence[str], *, filters: Filters | None = None
    ) -> dict[str, str]:
        """`ChunkTruth.existing_chunks` in this transaction."""
        self._check_project(project_id)
        async with self._turn:
            with self._guarded():
                return await select_existing_chunks(await self._connected(), project_id, chunk_ids, filters=filters)

    async def end(self, *, failed: bool) -> None:
        """Roll the transaction back and give its connection back; drop the connection if anything failed."""
        if failed or self._interrupted:
            # `pooled_driver` invalidates the connection of a transaction that ends with an error.
            await self._transaction.__aexit__(_InterruptedReadError, _InterruptedReadError(), None)
        else:
            await self._transaction.aclose()

    async def _connected(self) -> asyncpg.Connection:
        if self._connection is None:
            # On the driver's own connection: this read runs on every query (`app.engines.postgres_driver`).
            opening = project_read(self._engine, [self._project_id])
            self._connection = await self._transaction.enter_async_context(opening)
        return self._connection

    @contextmanager
    def _guarded(self) -> Iterator[None]:
        """Driver errors translated; after any failure or cut-off, this and every later call fails."""
        if self._interrupted:
            msg = "an earlier statement of this read failed or was cut off"
            raise EngineUnavailableError(msg, engine=self._engine_name)
        try:
            with translate_errors(engine=self._engine_name):
                yield
        except BaseException:
            self._interrupted = True
            raise

    def _check_project(self, project_id: str) -> None:
        if project_id != self._project_id:
            msg = f"a read of project {self._project_id!r} asked about project {project_id!r}"
            raise ValueError(msg)


READS_BEGUN_AHEAD_AT_MOST: Final = 2
"""How many reads of one index may be open at once for one of them to begin ahead (itself included).

A read begun ahead overlaps its transaction's round trips with the query's embedding on a core the search
would leave idle. With more searches in flight no core is idle: begun ahead, reads cost each search about
1 ms more of the server's CPU and 0.3 ms of PostgreSQL's (bench_load, 16 and 64 clients, ABBA: 105.0 and
109.4 hybrid QPS at 16 against 120.3 and 118.5) for nothing."""


def opens_ahead(pool: Pool, *, reads_open: int) -> bool:
    """Whether a read may begin before its first call: while few reads are open and most of `pool` is free.

    `reads_open`: the index's reads open now, the one asking included (`READS_BEGUN_AHEAD_AT_MOST`); fewer than
    half of the pool's connections in use leaves the other searches theirs.
    """
    if reads_open > READS_BEGUN_AHEAD_AT_MOST:
        return False
    if not isinstance(pool, QueuePool):
        return True
    return pool.checkedout() < max(1, pool.size() // 2)


class _InterruptedReadError(Exception):
    """Ends a read whose connection must not be reused: a call of it failed or was cut off."""


async def select_existing_chunks(
    connection: asyncpg.Connection, project_id: str, chunk_ids: Sequence[str], *, filters: Filters | None = None
) -> dict[str, str]:
    """Chunk id -> chunk hash of `chunk_ids` the project holds (meeting `filters`), in the caller's transaction."""
    if not chunk_ids:
        return {}
    parameters: dict[str, object] = {}
    rows = await fetch(connection, existing_chunks_sql(project_id, chunk_ids, filters, parameters), parameters)
    return {row["chunk_id"]: row["chunk_hash"] for row in rows}


def existing_chunks_sql(
    project_id: str, chunk_ids: Sequence[str], filters: Filters | None, parameters: dict[str, object]
) -> str:
    """SELECT chunk id and hash of those of `chunk_ids` the project holds; fills `parameters`.

    With `filters` (of the same project), only rows that meet them as stored now: levels, tags, source and
    event times; not their `chunk_ids` (the ids asked are these) nor excluded terms (the lexical engine
    checked the text, which the hash confirms).
    """
    if filters is None:
        parameters["project_id"] = project_id
        where = "project_id = :project_id"
    else:
        if filters.project_id != project_id:
            msg = f"filters of project {filters.project_id!r} for chunks of {project_id!r}"
            raise ValueError(msg)
        where = filter_sql(replace(filters, chunk_ids=None), parameters, exclusions=False)
    parameters["confirm_ids"] = list(chunk_ids)
    return (
        f"SELECT chunk_id, chunk_hash FROM chunks WHERE {where} "  # noqa: S608 - only our own fragments
        "AND chunk_id = ANY(CAST(:confirm_ids AS text[]))"
    )
