"""`PostgresDocumentStore`: the source of truth for documents, chunks, embeddings and the lexical outbox.

It shares the SQLAlchemy `AsyncEngine` of `app.engines.pgvector` (the app lifespan owns it). The SQL
it runs is in `app.engines.postgres_sql`, rows and parameters are mapped by `app.engines.postgres_rows`,
and driver errors become `EngineError`s in `app.engines.postgres_errors.translate_errors()`. Draining the
outbox (claim, release, complete, count) is `app.engines.postgres_outbox`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import weakref
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Final

from sqlalchemy import text

from app.domain.document_versions import DocumentState, SavedVersions
from app.domain.models import DocumentChunks, OutboxStats, StoredDocument
from app.engines import postgres_catalog, postgres_locks, postgres_outbox, postgres_versions
from app.engines.pgvector import ping_database, writers_at_once
from app.engines.pgvector_read import select_existing_chunks
from app.engines.postgres_driver import fetch, pooled_driver, project_read
from app.engines.postgres_errors import translate_errors
from app.engines.postgres_rows import (
    chunk_from_row,
    chunk_parameters,
    document_parameters,
    json_value,
    key_parameters,
)
from app.engines.postgres_scope import project_transaction
from app.engines.postgres_snapshots import project_snapshot
from app.engines.postgres_sql import (
    DELETE_REPLACED_CHUNKS,
    MARK_PROJECT_NOT_INDEXED,
    QUEUE_DOCUMENTS,
    QUEUE_PROJECT,
    SELECT_CACHED_EMBEDDINGS,
    SELECT_DOCUMENT,
    SELECT_DOCUMENT_CHUNKS,
    SELECT_DOCUMENT_STATES,
    SELECT_DOCUMENT_TITLES,
    SELECT_GENERATION,
    UPSERT_CHUNK,
    UPSERT_DOCUMENT,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Collection, Mapping, Sequence
    from contextlib import AbstractAsyncContextManager

    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

    from app.domain.catalog import DocumentSelection, DocumentSummary, ProjectStats
    from app.domain.document_versions import DocumentKey, RestoreFloor
    from app.domain.models import EmbeddedChunk, Filters
    from app.engines.postgres_snapshots import PostgresProjectSnapshot

STORE_ENGINE: Final = "postgres"
DEFAULT_OUTBOX_LEASE_S: Final = 60.0
"""How long a claimed outbox entry stays with its claimer before another worker may take it."""


class PostgresDocumentStore:
    """`DocumentStore` on PostgreSQL: documents, chunks with embeddings, and the lexical outbox.

    The outbox holds one row per document awaiting lexical indexing, with a `version` taken from a
    sequence on every change; completing a claimed version leaves a newer change queued.
    """

    name = STORE_ENGINE

    def __init__(self, engine: AsyncEngine, *, outbox_lease_s: float = DEFAULT_OUTBOX_LEASE_S) -> None:
        self._engine = engine
        self._outbox_lease_s = outbox_lease_s
        # Dropped when no writer holds or waits for them: the map stays as small as the writes in flight.
        self._local_locks: weakref.WeakValueDictionary[DocumentKey, asyncio.Lock] = weakref.WeakValueDictionary()
        self._writers = asyncio.Semaphore(writers_at_once(engine.pool))

    async def get_document(self, project_id: str, document_id: str) -> StoredDocument | None:
        """Return the document with its chunks in position order, or None."""
        key = {"project_id": project_id, "document_id": document_id}
        with translate_errors(engine=self.name):
            async with project_transaction(self._engine, [project_id], isolation_level="REPEATABLE READ") as connection:
                document = (await connection.execute(text(SELECT_DOCUMENT), key)).one_or_none()
                chunk_rows = (
                    [] if document is None else (await connection.execute(text(SELECT_DOCUMENT_CHUNKS), key)).all()
                )
        if document is None:
            return None
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
            version=document.version,
        )

    async def document_states(self, keys: Sequence[DocumentKey]) -> dict[DocumentKey, DocumentState]:
        """Return the stored content hash, version and lexical state of each listed document that exists."""
        if not keys:
            return {}
        with translate_errors(engine=self.name):
            async with project_transaction(self._engine, {key[0] for key in keys}) as connection:
                rows = (await connection.execute(text(SELECT_DOCUMENT_STATES), key_parameters(keys))).all()
        return {
            (row.project_id, row.document_id): DocumentState(
                content_hash=row.content_hash, version=row.version, lexically_indexed=row.lexically_indexed
            )
            for row in rows
        }

    @asynccontextmanager
    async def lock_documents(self, keys: Sequence[DocumentKey]) -> AsyncIterator[None]:
        """Hold PostgreSQL advisory locks on these documents for the block: writers of one document queue up.

        Every process on this database takes the same locks, so concurrent writes of a document
        serialize in the order they asked. The locks end with their transaction: at the end of the
        block, or when the connection dies with its process. Writers in this process queue on local
        locks first, so a hot document holds one pooled connection per process, not one per writer.
        Then at most `writers_at_once(pool)` blocks run at once; the others wait without a
        connection. A block holds its lock's connection and takes a second one for each read or write
        inside it: with every pooled connection held by a lock, each block would wait for a second one
        that never comes (16 concurrent writes of 16 documents stalled the pool until its timeout and
        answered 504), and searches would find no connection either.
        """
        names = [postgres_locks.lock_name(key) for key in keys]
        async with contextlib.AsyncExitStack() as local:
            for key in sorted(set(keys)):
                lock = self._local_locks.get(key)
                if lock is None:
                    lock = self._local_locks[key] = asyncio.Lock()
                await local.enter_async_context(lock)
            # After the document locks: a writer waiting for a hot document holds no writer's place.
            await local.enter_async_context(self._writers)
            with translate_errors(engine=self.name):
                async with self._engine.connect() as connection, postgres_locks.holding(connection, names):
                    yield

    async def cached_embeddings(
        self, project_id: str, chunk_hashes: Sequence[str], *, model: str
    ) -> dict[str, list[float]]:
        """Return embeddings `project_id` already stores for these chunk hashes under `model` (hash -> vector).

        In the project's scope only: found across projects, `embedded: 0` (and the time saved) told a
        tenant that another project stores a text it guessed.
        """
        if not chunk_hashes:
            return {}
        with translate_errors(engine=self.name):
            async with project_transaction(self._engine, [project_id]) as connection:
                result = await connection.execute(
                    text(SELECT_CACHED_EMBEDDINGS),
                    {"project_id": project_id, "hashes": list(set(chunk_hashes)), "model": model},
                )
                rows = result.all()
        # pgvector's text form `[0.1,-2e-05]` is valid JSON.
        return {row.chunk_hash: json.loads(row.embedding) for row in rows}

    async def save_documents(
        self,
        documents: Sequence[tuple[StoredDocument, Sequence[EmbeddedChunk]]],
        *,
        replacing: Mapping[DocumentKey, int] | None = None,
        restoring: RestoreFloor | None = None,
    ) -> SavedVersions:
        """Atomically replace each document and its whole chunk set, and queue it for lexical indexing.

        One transaction for the batch. A document listed twice keeps its last entry. Chunks whose
        every field is unchanged are left as they are (no HNSW re-insert, still lexically indexed).
        Returns each document's new version, and those it created; the projects' generations move on in the same
        transaction. `replacing` (conditional writes) and what existed are read under the project locks a delete by
        selection also takes.
        """
        latest = {(document.project_id, document.document_id): (document, chunks) for document, chunks in documents}
        if not latest:
            return SavedVersions({})
        document_rows = [document_parameters(document, restoring=restoring) for document, _ in latest.values()]
        chunk_rows = {
            (document.project_id, embedded.chunk.chunk_id): chunk_parameters(document, embedded)
            for document, chunks in latest.values()
            for embedded in chunks
        }
        with translate_errors(engine=self.name):
            projects = {key[0] for key in latest}
            async with project_transaction(self._engine, projects, write=True) as connection:
                await postgres_catalog.lock_projects(connection, projects)
                await postgres_locks.check_still_held(connection, latest, engine=self.name)
                stored = await postgres_versions.stored_versions(connection, list(latest))
                postgres_versions.check_replacing(stored, replacing or {})
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
                versions = await connection.execute(text(SELECT_DOCUMENT_STATES), key_parameters(list(latest)))
                saved = {(row.project_id, row.document_id): int(row.version) for row in versions}
                generations = await postgres_versions.bump_generations_past(connection, saved)
        return SavedVersions(saved, frozenset(latest.keys() - stored.keys()), generations)

    async def delete_document(self, project_id: str, document_id: str) -> bool:
        """Delete the document and its chunks and queue the lexical delete; False when it did not exist."""
        with translate_errors(engine=self.name):
            async with project_transaction(self._engine, [project_id], write=True) as connection:
                await postgres_catalog.lock_projects(connection, {project_id})
                await postgres_locks.check_still_held(connection, [(project_id, document_id)], engine=self.name)
                result = await connection.execute(
                    text("DELETE FROM documents WHERE project_id = :project_id AND document_id = :document_id"),
                    {"project_id": project_id, "document_id": document_id},
                )
                deleted = result.rowcount > 0
                if deleted:
                    await _queue(connection, [(project_id, document_id)])
                    await postgres_versions.bump_generations(connection, {project_id})
        return deleted

    async def claim_outbox(self, *, limit: int) -> list[DocumentChunks]:
        """Lease up to `limit` queued documents for `outbox_lease_s`, with their chunks (`postgres_outbox`)."""
        return await postgres_outbox.claim_outbox(
            self._engine, limit=limit, lease_s=self._outbox_lease_s, store_name=self.name
        )

    async def release_outbox(self, documents: Sequence[DocumentChunks]) -> None:
        """End the lease of these claimed entries (their indexing failed): any worker may take them again."""
        await postgres_outbox.release_outbox(self._engine, documents, store_name=self.name)

    async def complete_outbox(self, documents: Sequence[DocumentChunks]) -> None:
        """Drop these documents' outbox entries at or below their claimed version; mark their chunks indexed."""
        await postgres_outbox.complete_outbox(self._engine, documents, store_name=self.name)

    async def outbox_stats(self, *, through: int | None = None) -> OutboxStats:
        """Return how many documents await lexical indexing (queued by `through`), how long the oldest has waited."""
        return await postgres_outbox.outbox_stats(self._engine, through=through, store_name=self.name)

    async def project_generation(self, project_id: str) -> int:
        """Return the project's generation: it moves on with every write that changes its answers (0: none yet)."""
        # Read before every search while the query cache is on: one round trip, no transaction (the
        # function scopes itself to the project, see migration 0005).
        with translate_errors(engine=self.name):
            async with pooled_driver(self._engine) as connection:
                rows = await fetch(connection, SELECT_GENERATION, {"project_id": project_id})
        return int(rows[0][0] or 0)

    async def existing_chunks(
        self, project_id: str, chunk_ids: Sequence[str], *, filters: Filters | None = None
    ) -> dict[str, str]:
        """Return chunk id -> chunk hash for those of `chunk_ids` the project holds now (meeting `filters`)."""
        if not chunk_ids:
            return {}
        with translate_errors(engine=self.name):
            # On the driver's connection, as the vector read: a lexical-only search confirms its hits here.
            async with project_read(self._engine, [project_id]) as connection:
                return await select_existing_chunks(connection, project_id, chunk_ids, filters=filters)

    async def document_titles(self, project_id: str, *, limit: int) -> list[str]:
        """Return the titles of at most `limit` of the project's documents."""
        if limit <= 0:
            return []
        with translate_errors(engine=self.name):
            async with project_read(self._engine, [project_id]) as connection:
                rows = await fetch(connection, SELECT_DOCUMENT_TITLES, {"project_id": project_id, "limit": limit})
        return [row["title"] for row in rows]

    async def queue_project_for_reindex(self, project_id: str) -> int:
        """Queue every document of the project and mark its chunks not indexed; return how many documents."""
        with translate_errors(engine=self.name):
            async with project_transaction(self._engine, [project_id], write=True) as connection:
                await postgres_catalog.lock_projects(connection, {project_id})
                await connection.execute(text(MARK_PROJECT_NOT_INDEXED), {"project_id": project_id})
                result = await connection.execute(text(QUEUE_PROJECT), {"project_id": project_id})
                return int(result.scalar_one())

    async def list_documents(
        self, selection: DocumentSelection, *, after: str | None, limit: int
    ) -> list[DocumentSummary]:
        """Return up to `limit` selected documents by id (code point order), ids strictly after `after`."""
        return await postgres_catalog.list_documents(
            self._engine, selection, after=after, limit=limit, store_name=self.name
        )

    def project_snapshot(self, project_id: str) -> AbstractAsyncContextManager[PostgresProjectSnapshot]:
        """The project at one moment: one `REPEATABLE READ`, `READ ONLY` transaction (`postgres_snapshots`)."""
        return project_snapshot(self._engine, project_id, store_name=self.name)

    async def delete_documents(self, selection: DocumentSelection) -> int:
        """Delete the selected documents and their chunks, queue their lexical deletes; return how many."""
        return await postgres_catalog.delete_documents(self._engine, selection, store_name=self.name)

    async def project_stats(self, project_id: str) -> ProjectStats:
        """Return the project's document and chunk counts and its lexical backlog; all zeros when unknown."""
        return await postgres_catalog.project_stats(self._engine, project_id, store_name=self.name)

    async def project_ids(self, *, among: Collection[str] | None = None) -> list[str]:
        """Return the id of every project that holds at least one document (of `among`, in their scope), sorted."""
        return await postgres_catalog.project_ids(self._engine, among=among, store_name=self.name)

    async def stored_embedding_model(self) -> str | None:
        """The model one stored chunk was embedded with (None: none yet), for the start-up check."""
        return await postgres_catalog.stored_embedding_model(self._engine, store_name=self.name)

    async def ping(self) -> None:
        """Return when PostgreSQL answers; raise `EngineUnavailableError` otherwise."""
        await ping_database(self._engine, name=self.name)


async def _queue(connection: AsyncConnection, keys: Sequence[tuple[str, str]]) -> None:
    await connection.execute(
        text(QUEUE_DOCUMENTS),
        {"projects": [key[0] for key in keys], "documents": [key[1] for key in keys]},
    )
