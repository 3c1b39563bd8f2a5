"""PostgreSQL adapters: `PostgresDocumentStore` (the source of truth) and `PgVectorIndex` (the vector leg).

Both run on one SQLAlchemy `AsyncEngine` (asyncpg) that the app lifespan owns and disposes. The SQL
they run is in `app.engines.postgres_sql`, rows and parameters are mapped by `app.engines.postgres_rows`,
and driver errors become `EngineError`s in `app.engines.postgres_errors.translate_errors()`.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import TYPE_CHECKING, Any, Final

from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from app.domain.errors import EngineTimeoutError, EngineUnavailableError
from app.domain.models import Chunk, DocumentChunks, ScoredHit, StoredDocument
from app.engines.postgres_errors import translate_errors
from app.engines.postgres_rows import (
    chunk_from_row,
    chunk_parameters,
    document_parameters,
    json_value,
    outbox_parameters,
    vector_literal,
)
from app.engines.postgres_sql import (
    COMPLETE_OUTBOX,
    DELETE_REPLACED_CHUNKS,
    MARK_PROJECT_NOT_INDEXED,
    QUEUE_DOCUMENTS,
    QUEUE_PROJECT,
    SELECT_CACHED_EMBEDDINGS,
    SELECT_CONTENT_HASH,
    SELECT_DOCUMENT,
    SELECT_DOCUMENT_CHUNKS,
    SELECT_QUEUED,
    SELECT_QUEUED_CHUNKS,
    SESSIONS_PRESET,
    SET_LOCAL_HNSW,
    UPSERT_CHUNK,
    UPSERT_DOCUMENT,
    exact_search_sql,
    filter_sql,
    nearest_search_sql,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

    from app.domain.models import EmbeddedChunk, Filters

VECTOR_ENGINE: Final = "pgvector"
STORE_ENGINE: Final = "postgres"
MAX_HNSW_EF_SEARCH: Final = 1000
"""pgvector's upper bound for `hnsw.ef_search`."""


def create_postgres_engine(
    url: str,
    *,
    pool_size: int = 10,
    connect_timeout_s: float = 5.0,
    command_timeout_s: float | None = None,
    hnsw_ef_search: int = 100,
) -> AsyncEngine:
    """An asyncpg `AsyncEngine` for both adapters; the caller disposes it (`await engine.dispose()`).

    `url` may be `postgresql://` (as `DATABASE_URL` usually is) or `postgresql+asyncpg://`.
    Connections are checked before use, so a restarted server costs one failed ping, not a failed call.
    Every session starts with pgvector's iterative scan on and `hnsw.ef_search = hnsw_ef_search`, so
    a vector search is one statement with no SET round trips (`PgVectorIndex` checks this once).
    """
    if url.startswith(("postgresql://", "postgres://")):
        url = "postgresql+asyncpg://" + url.split("://", 1)[1]
    connect_args: dict[str, Any] = {
        "timeout": connect_timeout_s,
        # JIT compilation costs more than it saves on short index-driven queries.
        "server_settings": {
            "application_name": "poimen-memory",
            "jit": "off",
            "hnsw.iterative_scan": "relaxed_order",
            "hnsw.ef_search": str(min(hnsw_ef_search, MAX_HNSW_EF_SEARCH)),
        },
    }
    if command_timeout_s is not None:
        connect_args["command_timeout"] = command_timeout_s
    return create_async_engine(
        url,
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_pre_ping=True,
        pool_timeout=connect_timeout_s,
        connect_args=connect_args,
    )


class PgVectorIndex:
    """`VectorIndex` over `chunks.embedding`: HNSW cosine search with every filter applied in SQL.

    Filtered queries use pgvector 0.8 iterative index scans (relaxed order, re-sorted here), so they
    still fill `top_k` when the filter is selective. With `filters.chunk_ids` the ranking is exact
    among those chunks (no index). `score` is cosine similarity, `1 - cosine distance`, in [-1, 1].
    """

    name = VECTOR_ENGINE

    def __init__(self, engine: AsyncEngine, *, ef_search: int = 100) -> None:
        self._engine = engine
        self._ef_search = ef_search
        self._sessions_preset: bool | None = None  # learnt on first search

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
        parameters: dict[str, object] = {"embedding": vector_literal(embedding), "top_k": top_k}
        where = filter_sql(filters, parameters)
        statement = exact_search_sql(where) if filters.chunk_ids is not None else nearest_search_sql(where)
        ef_search = min(max(self._ef_search, top_k), MAX_HNSW_EF_SEARCH)
        with translate_errors(engine=self.name):
            if top_k <= self._ef_search and await self._uses_preset_sessions():
                # One round trip: no BEGIN/SET/ROLLBACK around a read-only statement.
                async with self._engine.connect() as plain_connection:
                    connection = await plain_connection.execution_options(isolation_level="AUTOCOMMIT")
                    rows = (await connection.execute(text(statement), parameters)).all()
                return [ScoredHit(chunk=chunk_from_row(row), score=1.0 - float(row.distance)) for row in rows]
            async with self._engine.connect() as connection:
                # SET LOCAL: ends with this transaction, never leaks to the pool.
                await connection.execute(text(SET_LOCAL_HNSW), {"ef_search": str(ef_search)})
                rows = (await connection.execute(text(statement), parameters)).all()
                await connection.rollback()
        return [ScoredHit(chunk=chunk_from_row(row), score=1.0 - float(row.distance)) for row in rows]

    async def ping(self) -> None:
        """Return when PostgreSQL answers; raise `EngineUnavailableError` otherwise."""
        await _ping(self._engine, name=self.name)


async def _ping(engine: AsyncEngine, *, name: str) -> None:
    """`SELECT 1`; a timeout also counts as unavailable, as the ports' `ping` contract says."""
    try:
        with translate_errors(engine=name):
            async with engine.connect() as connection:
                await connection.execute(text("SELECT 1"))
    except EngineTimeoutError as error:
        raise EngineUnavailableError(error.message, engine=name) from error


class PostgresDocumentStore:
    """`DocumentStore` on PostgreSQL: documents, chunks with embeddings, and the lexical outbox.

    The outbox holds one row per document awaiting lexical indexing, with a `version` taken from a
    sequence on every change; completing a claimed version leaves a newer change queued.
    """

    name = STORE_ENGINE

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def get_document(self, project_id: str, document_id: str) -> StoredDocument | None:
        """Return the document with its chunks in position order, or None."""
        key = {"project_id": project_id, "document_id": document_id}
        with translate_errors(engine=self.name):
            async with self._engine.connect() as plain_connection:
                connection = await plain_connection.execution_options(isolation_level="REPEATABLE READ")
                document = (await connection.execute(text(SELECT_DOCUMENT), key)).one_or_none()
                if document is None:
                    return None
                chunk_rows = (await connection.execute(text(SELECT_DOCUMENT_CHUNKS), key)).all()
                await connection.rollback()
        return StoredDocument(
            project_id=project_id,
            document_id=document_id,
            source=document.source,
            title=document.title,
            content_hash=document.content_hash,
            tags=tuple(document.tags),
            event_time=document.event_time,
            metadata=json_value(document.metadata),
            chunks=tuple(chunk_from_row(row) for row in chunk_rows),
            lexically_indexed=document.lexically_indexed,
            created_at=document.created_at,
            updated_at=document.updated_at,
        )

    async def get_content_hash(self, project_id: str, document_id: str) -> str | None:
        """Return the stored content hash of the document, or None when it does not exist."""
        with translate_errors(engine=self.name):
            async with self._engine.connect() as connection:
                result = await connection.execute(
                    text(SELECT_CONTENT_HASH), {"project_id": project_id, "document_id": document_id}
                )
                content_hash: str | None = result.scalar_one_or_none()
                await connection.rollback()
        return content_hash

    async def cached_embeddings(self, chunk_hashes: Sequence[str], *, model: str) -> dict[str, list[float]]:
        """Return embeddings already stored for these chunk hashes under `model` (hash -> vector), any project."""
        if not chunk_hashes:
            return {}
        with translate_errors(engine=self.name):
            async with self._engine.connect() as connection:
                result = await connection.execute(
                    text(SELECT_CACHED_EMBEDDINGS), {"hashes": list(set(chunk_hashes)), "model": model}
                )
                rows = result.all()
                await connection.rollback()
        # pgvector's text form `[0.1,-2e-05]` is valid JSON.
        return {row.chunk_hash: json.loads(row.embedding) for row in rows}

    async def save_documents(self, documents: Sequence[tuple[StoredDocument, Sequence[EmbeddedChunk]]]) -> None:
        """Atomically replace each document and its whole chunk set, and queue it for lexical indexing.

        One transaction for the batch. A document listed twice keeps its last entry. Chunks whose
        every field is unchanged are left as they are (no HNSW re-insert, still lexically indexed).
        """
        latest = {(document.project_id, document.document_id): (document, chunks) for document, chunks in documents}
        if not latest:
            return
        document_rows = [document_parameters(document) for document, _ in latest.values()]
        chunk_rows = {
            (document.project_id, embedded.chunk.chunk_id): chunk_parameters(document, embedded)
            for document, chunks in latest.values()
            for embedded in chunks
        }
        with translate_errors(engine=self.name):
            async with self._engine.begin() as connection:
                await connection.execute(text(UPSERT_DOCUMENT), document_rows)
                await connection.execute(
                    text(DELETE_REPLACED_CHUNKS),
                    {
                        "document_projects": [key[0] for key in latest],
                        "document_ids": [key[1] for key in latest],
                        "keep_projects": [key[0] for key in chunk_rows],
                        "keep_chunk_ids": [key[1] for key in chunk_rows],
                    },
                )
                if chunk_rows:
                    await connection.execute(text(UPSERT_CHUNK), list(chunk_rows.values()))
                await _queue(connection, list(latest))

    async def delete_document(self, project_id: str, document_id: str) -> bool:
        """Delete the document and its chunks and queue the lexical delete; False when it did not exist."""
        with translate_errors(engine=self.name):
            async with self._engine.begin() as connection:
                result = await connection.execute(
                    text("DELETE FROM documents WHERE project_id = :project_id AND document_id = :document_id"),
                    {"project_id": project_id, "document_id": document_id},
                )
                deleted = result.rowcount > 0
                if deleted:
                    await _queue(connection, [(project_id, document_id)])
        return deleted

    async def claim_outbox(self, *, limit: int) -> list[DocumentChunks]:
        """Return up to `limit` queued documents, oldest change first, each with its current chunks.

        Reads the queue and the chunks in one snapshot, so each snapshot answers its `outbox_version`.
        A deleted document comes back with no chunks. Claiming does not dequeue: `complete_outbox` does.
        """
        if limit <= 0:
            return []
        with translate_errors(engine=self.name):
            async with self._engine.connect() as plain_connection:
                connection = await plain_connection.execution_options(isolation_level="REPEATABLE READ")
                queued = (await connection.execute(text(SELECT_QUEUED), {"limit": limit})).all()
                chunk_rows = (
                    (
                        await connection.execute(
                            text(SELECT_QUEUED_CHUNKS),
                            {
                                "projects": [row.project_id for row in queued],
                                "documents": [row.document_id for row in queued],
                            },
                        )
                    ).all()
                    if queued
                    else []
                )
                await connection.rollback()
        chunks_by_document: dict[tuple[str, str], list[Chunk]] = defaultdict(list)
        for row in chunk_rows:
            chunks_by_document[row.project_id, row.document_id].append(chunk_from_row(row))
        return [
            DocumentChunks(
                project_id=row.project_id,
                document_id=row.document_id,
                chunks=tuple(chunks_by_document.get((row.project_id, row.document_id), ())),
                outbox_version=row.version,
            )
            for row in queued
        ]

    async def complete_outbox(self, documents: Sequence[DocumentChunks]) -> None:
        """Drop these documents' outbox entries at or below their claimed version; mark their chunks indexed.

        A newer entry (changed after the claim) stays queued and its chunks stay unmarked. Without
        `outbox_version`, any queued version is completed.
        """
        if not documents:
            return
        with translate_errors(engine=self.name):
            async with self._engine.begin() as connection:
                await connection.execute(text(COMPLETE_OUTBOX), outbox_parameters(documents))

    async def outbox_backlog(self) -> int:
        """Return how many documents await lexical indexing."""
        with translate_errors(engine=self.name):
            async with self._engine.connect() as connection:
                backlog = (await connection.execute(text("SELECT count(*) FROM lexical_outbox"))).scalar_one()
                await connection.rollback()
        return int(backlog)

    async def queue_project_for_reindex(self, project_id: str) -> int:
        """Queue every document of the project and mark its chunks not indexed; return how many documents."""
        with translate_errors(engine=self.name):
            async with self._engine.begin() as connection:
                await connection.execute(text(MARK_PROJECT_NOT_INDEXED), {"project_id": project_id})
                result = await connection.execute(text(QUEUE_PROJECT), {"project_id": project_id})
                return int(result.scalar_one())

    async def project_ids(self) -> list[str]:
        """Return the id of every project that holds at least one document, sorted."""
        with translate_errors(engine=self.name):
            async with self._engine.connect() as connection:
                result = await connection.execute(text("SELECT DISTINCT project_id FROM documents ORDER BY project_id"))
                return [str(row[0]) for row in result]

    async def ping(self) -> None:
        """Return when PostgreSQL answers; raise `EngineUnavailableError` otherwise."""
        await _ping(self._engine, name=self.name)


async def _queue(connection: AsyncConnection, keys: Sequence[tuple[str, str]]) -> None:
    await connection.execute(
        text(QUEUE_DOCUMENTS),
        {"projects": [key[0] for key in keys], "documents": [key[1] for key in keys]},
    )
