"""PostgreSQL adapters: `PostgresDocumentStore` (the source of truth) and `PgVectorIndex` (the vector leg).

Both run on one SQLAlchemy `AsyncEngine` (asyncpg) that the app lifespan owns and disposes; tables
are in `app.engines.schema`. Queries are hand-written SQL so the hot path stays a prepared statement
(asyncpg caches them per connection) with no ORM in between. Driver errors become `EngineError`s
in `translate_errors()`, the one place that knows them.
"""

from __future__ import annotations

import json
from collections import defaultdict
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final

import asyncpg
from sqlalchemy import exc as sqlalchemy_errors
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from app.domain.errors import EngineTimeoutError, EngineUnavailableError, SearchServiceError
from app.domain.models import Chunk, DocumentChunks, ScoredHit, StoredDocument

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence

    from sqlalchemy.engine import Row
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

    from app.domain.models import EmbeddedChunk, Filters

VECTOR_ENGINE: Final = "pgvector"
STORE_ENGINE: Final = "postgres"
MAX_HNSW_EF_SEARCH: Final = 1000
"""pgvector's upper bound for `hnsw.ef_search`."""
QUERY_CANCELED_SQLSTATE: Final = "57014"
"""statement_timeout or a cancel request: the engine was too slow, not gone."""
ANY_VERSION: Final = 2**63 - 1
"""Completes an outbox entry whatever its version (a `DocumentChunks` without `outbox_version`)."""


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


@contextmanager
def translate_errors(*, engine: str) -> Iterator[None]:
    """Re-raise driver errors as `EngineTimeoutError` (too slow) or `EngineUnavailableError` (anything else).

    Our own `SearchServiceError`s and cancellation pass through unchanged.
    """
    try:
        yield
    except SearchServiceError:
        raise
    except (TimeoutError, sqlalchemy_errors.TimeoutError) as error:
        message = f"{engine} did not answer in time"
        raise EngineTimeoutError(message, engine=engine) from error
    except (sqlalchemy_errors.SQLAlchemyError, asyncpg.PostgresError, asyncpg.InterfaceError, OSError) as error:
        if _was_cancelled_by_server(error):
            message = f"{engine} cancelled the statement (timeout)"
            raise EngineTimeoutError(message, engine=engine) from error
        message = f"{engine} failed: {type(error).__name__}: {_first_line(error)}"
        raise EngineUnavailableError(message, engine=engine) from error


def _was_cancelled_by_server(error: BaseException) -> bool:
    cause: BaseException | None = error
    while cause is not None:
        if isinstance(cause, asyncpg.QueryCanceledError) or getattr(cause, "sqlstate", None) == QUERY_CANCELED_SQLSTATE:
            return True
        cause = cause.__cause__
    return False


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [""])[0][:200]


CHUNK_COLUMNS: Final = (
    "chunk_id, document_id, project_id, text, source, level, breadcrumb, section_title, position, tags, "
    "event_time, chunk_hash"
)
"""What a search hit needs: everything but the context, which only the lexical indexes read."""
STORED_CHUNK_COLUMNS: Final = f"{CHUNK_COLUMNS}, context"
"""What the store hands back (`get_document`, `claim_outbox`): the chunk with its context."""


def _chunk_from_row(row: Row[Any]) -> Chunk:
    return Chunk(
        chunk_id=row.chunk_id,
        document_id=row.document_id,
        project_id=row.project_id,
        text=row.text,
        source=row.source,
        level=row.level,
        breadcrumb=tuple(row.breadcrumb),
        section_title=row.section_title,
        position=row.position,
        tags=tuple(row.tags),
        event_time=row.event_time,
        chunk_hash=row.chunk_hash,
        context=row._mapping.get("context", ""),  # noqa: SLF001 - Row's documented mapping view
    )


def _json_value(value: object) -> dict[str, object]:
    # SQLAlchemy's asyncpg dialect registers a jsonb codec that already decodes; plain asyncpg gives text.
    decoded = json.loads(value) if isinstance(value, str | bytes) else value
    return dict(decoded) if isinstance(decoded, dict) else {}


def vector_literal(embedding: Sequence[float]) -> str:
    """The text form pgvector parses, `[0.1,0.2]`; sent as text and cast in SQL, so no codec registration is needed."""
    return "[" + ",".join(str(float(value)) for value in embedding) + "]"


def _filter_sql(filters: Filters, parameters: dict[str, object]) -> str:
    """SQL conditions (after `project_id = :project_id`) for every filter; fills `parameters`.

    Each combination of filters is its own statement text, so each gets a plan fit for it.
    """
    conditions = ["project_id = :project_id"]
    parameters["project_id"] = filters.project_id
    if filters.levels:
        conditions.append("level = ANY(CAST(:levels AS text[]))")
        parameters["levels"] = list(filters.levels)
    if filters.tags:
        conditions.append("tags @> CAST(:tags AS text[])")
        parameters["tags"] = list(filters.tags)
    if filters.source_prefix:
        conditions.append("source LIKE :source_pattern")
        parameters["source_pattern"] = _like_prefix(filters.source_prefix)
    window = []
    if filters.event_time_from is not None:
        window.append("event_time >= :event_time_from")
        parameters["event_time_from"] = filters.event_time_from
    if filters.event_time_to is not None:
        window.append("event_time < :event_time_to")
        parameters["event_time_to"] = filters.event_time_to
    if window:
        within = " AND ".join(window)
        conditions.append(f"({within} OR event_time IS NULL)" if filters.include_undated else within)
    if filters.chunk_ids is not None:
        conditions.append("chunk_id = ANY(CAST(:chunk_ids AS text[]))")
        parameters["chunk_ids"] = list(filters.chunk_ids)
    return " AND ".join(conditions)


def _like_prefix(prefix: str) -> str:
    escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped + "%"


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
                result = await connection.execute(
                    text(
                        "SELECT current_setting('hnsw.iterative_scan', true) = 'relaxed_order' "
                        "AND coalesce(current_setting('hnsw.ef_search', true), '0')::int >= :ef_search"
                    ),
                    {"ef_search": self._ef_search},
                )
                self._sessions_preset = bool(result.scalar_one())
                await connection.rollback()
        return self._sessions_preset

    async def search(self, embedding: Sequence[float], *, top_k: int, filters: Filters) -> list[ScoredHit]:
        """Return at most `top_k` chunks matching `filters`, best first (ties by chunk id)."""
        if top_k <= 0 or filters.chunk_ids == ():
            return []
        parameters: dict[str, object] = {"embedding": vector_literal(embedding), "top_k": top_k}
        where = _filter_sql(filters, parameters)
        if filters.chunk_ids is not None:
            # Materialising the candidates first keeps the planner off the HNSW index: exact ranking.
            statement = (
                f"WITH candidates AS MATERIALIZED (SELECT {CHUNK_COLUMNS}, embedding FROM chunks WHERE {where}) "  # noqa: S608 - only our own fragments
                f"SELECT {CHUNK_COLUMNS}, embedding <=> CAST(:embedding AS vector) AS distance FROM candidates "
                "ORDER BY distance, chunk_id LIMIT :top_k"
            )
        else:
            statement = (
                f"WITH nearest AS MATERIALIZED (SELECT {CHUNK_COLUMNS}, "  # noqa: S608 - only our own fragments
                f"embedding <=> CAST(:embedding AS vector) AS distance FROM chunks WHERE {where} "
                "ORDER BY embedding <=> CAST(:embedding AS vector) LIMIT :top_k) "
                # relaxed_order may return neighbours slightly out of order: sort them again.
                f"SELECT {CHUNK_COLUMNS}, distance FROM nearest ORDER BY distance, chunk_id"
            )
        ef_search = min(max(self._ef_search, top_k), MAX_HNSW_EF_SEARCH)
        with translate_errors(engine=self.name):
            if top_k <= self._ef_search and await self._uses_preset_sessions():
                # One round trip: no BEGIN/SET/ROLLBACK around a read-only statement.
                async with self._engine.connect() as plain_connection:
                    connection = await plain_connection.execution_options(isolation_level="AUTOCOMMIT")
                    rows = (await connection.execute(text(statement), parameters)).all()
                return [ScoredHit(chunk=_chunk_from_row(row), score=1.0 - float(row.distance)) for row in rows]
            async with self._engine.connect() as connection:
                # set_config(..., true) is SET LOCAL: it ends with this transaction, never leaks to the pool.
                await connection.execute(
                    text(
                        "SELECT set_config('hnsw.ef_search', :ef_search, true), "
                        "set_config('hnsw.iterative_scan', 'relaxed_order', true)"
                    ),
                    {"ef_search": str(ef_search)},
                )
                rows = (await connection.execute(text(statement), parameters)).all()
                await connection.rollback()
        return [ScoredHit(chunk=_chunk_from_row(row), score=1.0 - float(row.distance)) for row in rows]

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
                document = (
                    await connection.execute(
                        text(
                            "SELECT source, title, content_hash, tags, event_time, metadata, created_at, updated_at, "
                            "NOT EXISTS (SELECT 1 FROM lexical_outbox o WHERE o.project_id = d.project_id "
                            "AND o.document_id = d.document_id) AS lexically_indexed "
                            "FROM documents d WHERE project_id = :project_id AND document_id = :document_id"
                        ),
                        key,
                    )
                ).one_or_none()
                if document is None:
                    return None
                chunk_rows = (
                    await connection.execute(
                        text(
                            f"SELECT {STORED_CHUNK_COLUMNS} FROM chunks "  # noqa: S608 - constant column list
                            "WHERE project_id = :project_id AND document_id = :document_id ORDER BY position, chunk_id"
                        ),
                        key,
                    )
                ).all()
                await connection.rollback()
        return StoredDocument(
            project_id=project_id,
            document_id=document_id,
            source=document.source,
            title=document.title,
            content_hash=document.content_hash,
            tags=tuple(document.tags),
            event_time=document.event_time,
            metadata=_json_value(document.metadata),
            chunks=tuple(_chunk_from_row(row) for row in chunk_rows),
            lexically_indexed=document.lexically_indexed,
            created_at=document.created_at,
            updated_at=document.updated_at,
        )

    async def get_content_hash(self, project_id: str, document_id: str) -> str | None:
        """Return the stored content hash of the document, or None when it does not exist."""
        with translate_errors(engine=self.name):
            async with self._engine.connect() as connection:
                result = await connection.execute(
                    text(
                        "SELECT content_hash FROM documents WHERE project_id = :project_id "
                        "AND document_id = :document_id"
                    ),
                    {"project_id": project_id, "document_id": document_id},
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
                    text(
                        "SELECT DISTINCT ON (chunk_hash) chunk_hash, CAST(embedding AS text) AS embedding FROM chunks "
                        "WHERE chunk_hash = ANY(CAST(:hashes AS text[])) AND embedding_model = :model"
                    ),
                    {"hashes": list(set(chunk_hashes)), "model": model},
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
        document_rows = [_document_parameters(document) for document, _ in latest.values()]
        chunk_rows = {
            (document.project_id, embedded.chunk.chunk_id): _chunk_parameters(document, embedded)
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
                queued = (
                    await connection.execute(
                        text(
                            "SELECT project_id, document_id, version FROM lexical_outbox ORDER BY version LIMIT :limit"
                        ),
                        {"limit": limit},
                    )
                ).all()
                chunk_rows = (
                    (
                        await connection.execute(
                            text(
                                f"SELECT {STORED_CHUNK_COLUMNS} FROM chunks "  # noqa: S608 - constant column list
                                "JOIN unnest(CAST(:projects AS text[]), CAST(:documents AS text[])) "
                                "AS queued(project_id, document_id) USING (project_id, document_id) "
                                "ORDER BY project_id, document_id, position, chunk_id"
                            ),
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
            chunks_by_document[row.project_id, row.document_id].append(_chunk_from_row(row))
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
                await connection.execute(
                    text(COMPLETE_OUTBOX),
                    {
                        "projects": [document.project_id for document in documents],
                        "documents": [document.document_id for document in documents],
                        "versions": [
                            ANY_VERSION if document.outbox_version is None else document.outbox_version
                            for document in documents
                        ],
                    },
                )

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
                await connection.execute(
                    text(
                        "UPDATE chunks SET lexically_indexed = false "
                        "WHERE project_id = :project_id AND lexically_indexed"
                    ),
                    {"project_id": project_id},
                )
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


UPSERT_DOCUMENT: Final = (
    "INSERT INTO documents (project_id, document_id, source, title, content_hash, tags, event_time, metadata, "
    "created_at, updated_at) VALUES (:project_id, :document_id, :source, :title, :content_hash, "
    "CAST(:tags AS text[]), :event_time, CAST(:metadata AS jsonb), :created_at, :updated_at) "
    "ON CONFLICT (project_id, document_id) DO UPDATE SET source = EXCLUDED.source, title = EXCLUDED.title, "
    "content_hash = EXCLUDED.content_hash, tags = EXCLUDED.tags, event_time = EXCLUDED.event_time, "
    "metadata = EXCLUDED.metadata, updated_at = EXCLUDED.updated_at"
)
"""Insert or replace a document; a replaced document keeps its first `created_at`."""

DELETE_REPLACED_CHUNKS: Final = (
    "DELETE FROM chunks c USING unnest(CAST(:document_projects AS text[]), CAST(:document_ids AS text[])) "
    "AS saved(project_id, document_id) "
    "WHERE c.project_id = saved.project_id AND c.document_id = saved.document_id "
    "AND NOT EXISTS (SELECT 1 FROM unnest(CAST(:keep_projects AS text[]), CAST(:keep_chunk_ids AS text[])) "
    "AS kept(project_id, chunk_id) WHERE kept.project_id = c.project_id AND kept.chunk_id = c.chunk_id)"
)
"""Delete the chunks of saved documents that are not in their new chunk sets."""

UPSERT_CHUNK: Final = (
    "INSERT INTO chunks AS c (project_id, chunk_id, document_id, text, source, level, breadcrumb, section_title, "
    "position, tags, event_time, chunk_hash, context, embedding, embedding_model, lexically_indexed) VALUES "
    "(:project_id, :chunk_id, :document_id, :text, :source, :level, CAST(:breadcrumb AS text[]), :section_title, "
    ":position, CAST(:tags AS text[]), :event_time, :chunk_hash, :context, CAST(:embedding AS vector), "
    ":embedding_model, false) "
    "ON CONFLICT (project_id, chunk_id) DO UPDATE SET document_id = EXCLUDED.document_id, text = EXCLUDED.text, "
    "source = EXCLUDED.source, level = EXCLUDED.level, breadcrumb = EXCLUDED.breadcrumb, "
    "section_title = EXCLUDED.section_title, position = EXCLUDED.position, tags = EXCLUDED.tags, "
    "event_time = EXCLUDED.event_time, chunk_hash = EXCLUDED.chunk_hash, context = EXCLUDED.context, "
    "embedding = EXCLUDED.embedding, "
    "embedding_model = EXCLUDED.embedding_model, lexically_indexed = false, updated_at = now() "
    # Unchanged rows are skipped: no new row version, no HNSW insert.
    "WHERE (c.document_id, c.text, c.source, c.level, c.breadcrumb, c.section_title, c.position, c.tags, "
    "c.event_time, c.chunk_hash, c.context, c.embedding_model) IS DISTINCT FROM (EXCLUDED.document_id, "
    "EXCLUDED.text, EXCLUDED.source, EXCLUDED.level, EXCLUDED.breadcrumb, EXCLUDED.section_title, "
    "EXCLUDED.position, EXCLUDED.tags, EXCLUDED.event_time, EXCLUDED.chunk_hash, EXCLUDED.context, "
    "EXCLUDED.embedding_model) "
    "OR c.embedding <> EXCLUDED.embedding"
)

QUEUE_DOCUMENTS: Final = (
    "INSERT INTO lexical_outbox (project_id, document_id) "
    "SELECT * FROM unnest(CAST(:projects AS text[]), CAST(:documents AS text[])) "
    "ON CONFLICT (project_id, document_id) DO UPDATE "
    "SET version = nextval('lexical_outbox_version_seq'), queued_at = now()"
)
"""Queue documents, or bump the version of those already queued so a running claim cannot complete them."""

QUEUE_PROJECT: Final = (
    "WITH queued AS (INSERT INTO lexical_outbox (project_id, document_id) "
    "SELECT project_id, document_id FROM documents WHERE project_id = :project_id "
    "ON CONFLICT (project_id, document_id) DO UPDATE "
    "SET version = nextval('lexical_outbox_version_seq'), queued_at = now() RETURNING 1) "
    "SELECT count(*) FROM queued"
)

COMPLETE_OUTBOX: Final = (
    "WITH done AS (DELETE FROM lexical_outbox o "
    "USING unnest(CAST(:projects AS text[]), CAST(:documents AS text[]), CAST(:versions AS bigint[])) "
    "AS claimed(project_id, document_id, version) "
    "WHERE o.project_id = claimed.project_id AND o.document_id = claimed.document_id "
    "AND o.version <= claimed.version RETURNING o.project_id, o.document_id) "
    "UPDATE chunks c SET lexically_indexed = true FROM done "
    "WHERE c.project_id = done.project_id AND c.document_id = done.document_id AND NOT c.lexically_indexed"
)


async def _queue(connection: AsyncConnection, keys: Sequence[tuple[str, str]]) -> None:
    await connection.execute(
        text(QUEUE_DOCUMENTS),
        {"projects": [key[0] for key in keys], "documents": [key[1] for key in keys]},
    )


def _document_parameters(document: StoredDocument) -> Mapping[str, object]:
    return {
        "project_id": document.project_id,
        "document_id": document.document_id,
        "source": document.source,
        "title": document.title,
        "content_hash": document.content_hash,
        "tags": list(document.tags),
        "event_time": document.event_time,
        "metadata": json.dumps(dict(document.metadata), default=str),
        "created_at": document.created_at,
        "updated_at": document.updated_at,
    }


def _chunk_parameters(document: StoredDocument, embedded: EmbeddedChunk) -> Mapping[str, object]:
    chunk = embedded.chunk
    return {
        # The document decides where its chunks live, whatever a chunk says.
        "project_id": document.project_id,
        "chunk_id": chunk.chunk_id,
        "document_id": document.document_id,
        "text": chunk.text,
        "source": chunk.source,
        "level": chunk.level,
        "breadcrumb": list(chunk.breadcrumb),
        "section_title": chunk.section_title,
        "position": chunk.position,
        "tags": list(chunk.tags),
        "event_time": chunk.event_time,
        "chunk_hash": chunk.chunk_hash,
        "context": chunk.context,
        "embedding": vector_literal(embedded.embedding),
        "embedding_model": embedded.embedding_model,
    }
