"""The PostgreSQL side of the memory-management use cases: list, export, delete by selection, project stats.

Functions over the `AsyncEngine` that `PostgresDocumentStore` delegates to, so the store module stays
about writes. Documents are ordered by id in code point order (`COLLATE "C"`), the same
order Python sorts strings in, so the in-memory fake pages exactly like PostgreSQL.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import TYPE_CHECKING, Any, Final

from sqlalchemy import text

from app.domain.catalog import DocumentSummary, ProjectStats
from app.domain.models import EmbeddedChunk, StoredDocument
from app.domain.moments import as_utc
from app.domain.tags import tag_key
from app.engines.postgres_errors import translate_errors
from app.engines.postgres_rows import chunk_from_row, json_value
from app.engines.postgres_scope import all_projects_transaction, project_transaction
from app.engines.postgres_sql import (
    LOCK_PROJECTS,
    PROJECT_IDS,
    PROJECT_LOCK_NAMESPACE,
    STORED_CHUNK_COLUMNS,
    like_prefix,
    tag_keys_sql,
)
from app.engines.postgres_versions import bump_generations

if TYPE_CHECKING:
    from collections.abc import Collection

    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

    from app.domain.catalog import DocumentSelection
    from app.domain.models import Chunk

_INDEXED: Final = (
    "NOT EXISTS (SELECT 1 FROM lexical_outbox o WHERE o.project_id = d.project_id "
    "AND o.document_id = d.document_id) AS lexically_indexed"
)
_DOCUMENT_COLUMNS: Final = (
    "d.document_id, d.source, d.title, d.content_hash, d.tags, d.event_time, d.metadata, d.created_at, "
    f"d.updated_at, d.version, {_INDEXED}"
)
SELECT_PROJECT_STATS: Final = (
    "SELECT (SELECT count(*) FROM documents WHERE project_id = :project_id) AS documents, "
    "(SELECT count(*) FROM chunks WHERE project_id = :project_id) AS chunks, "
    "(SELECT count(*) FROM chunks WHERE project_id = :project_id AND lexically_indexed) AS lexically_indexed, "
    "(SELECT count(*) FROM lexical_outbox WHERE project_id = :project_id) AS pending, "
    "(SELECT coalesce(extract(epoch FROM now() - min(queued_at)), 0) FROM lexical_outbox "
    "WHERE project_id = :project_id) AS oldest_pending_age_s, "
    "(SELECT max(updated_at) FROM documents WHERE project_id = :project_id) AS last_write_at"
)
DELETE_SELECTED: Final = (
    "WITH gone AS (DELETE FROM documents d WHERE {where} RETURNING d.project_id, d.document_id), "
    "queued AS (INSERT INTO lexical_outbox (project_id, document_id) SELECT project_id, document_id FROM gone "
    "ON CONFLICT (project_id, document_id) DO UPDATE "
    "SET version = nextval('lexical_outbox_version_seq'), queued_at = now(), claimed_until = NULL RETURNING 1) "
    "SELECT count(*) FROM queued"
)
"""Delete the selected documents (their chunks go by the foreign key's cascade) and queue each lexical delete."""


def selection_sql(selection: DocumentSelection, parameters: dict[str, object]) -> str:
    """SQL conditions on `documents d` for every condition of `selection`; fills `parameters`."""
    conditions = ["d.project_id = :project_id"]
    parameters["project_id"] = selection.project_id
    if selection.source_prefix:
        conditions.append("d.source LIKE :source_pattern")
        parameters["source_pattern"] = like_prefix(selection.source_prefix)
    if selection.tag is not None:
        conditions.append(f"CAST(:tag_key AS text) = ANY({tag_keys_sql('d.')})")
        parameters["tag_key"] = tag_key(selection.tag)
    if selection.event_time_from is not None:
        conditions.append("d.event_time >= :event_time_from")
        parameters["event_time_from"] = selection.event_time_from
    if selection.event_time_to is not None:
        conditions.append("d.event_time < :event_time_to")
        parameters["event_time_to"] = selection.event_time_to
    if selection.updated_since is not None:
        conditions.append("d.updated_at >= :updated_since")
        parameters["updated_since"] = selection.updated_since
    return " AND ".join(conditions)


def _page_sql(where: str, after: str | None, parameters: dict[str, object], limit: int) -> str:
    parameters["limit"] = max(limit, 0)
    if after is not None:
        parameters["after"] = after
        where += ' AND d.document_id COLLATE "C" > CAST(:after AS text) COLLATE "C"'
    return f'{where} ORDER BY d.document_id COLLATE "C" LIMIT :limit'


async def list_documents(
    engine: AsyncEngine, selection: DocumentSelection, *, after: str | None, limit: int, store_name: str
) -> list[DocumentSummary]:
    """Up to `limit` selected documents by id (code point order) after `after`, with chunk counts."""
    with translate_errors(engine=store_name):
        async with project_transaction(engine, [selection.project_id]) as connection:
            return await listed_documents(connection, selection, after=after, limit=limit)


async def listed_documents(
    connection: AsyncConnection, selection: DocumentSelection, *, after: str | None, limit: int
) -> list[DocumentSummary]:
    """`list_documents` in the caller's transaction (a snapshot's); driver errors are the caller's to translate."""
    parameters: dict[str, object] = {}
    page = _page_sql(selection_sql(selection, parameters), after, parameters, limit)
    statement = (
        f"SELECT {_DOCUMENT_COLUMNS}, (SELECT count(*) FROM chunks c WHERE c.project_id = d.project_id "  # noqa: S608 - only our own fragments
        f"AND c.document_id = d.document_id) AS chunk_count FROM documents d WHERE {page}"
    )
    rows = (await connection.execute(text(statement), parameters)).all()
    return [
        DocumentSummary(
            document_id=row.document_id,
            source=row.source,
            title=row.title,
            tags=tuple(row.tags),
            event_time=as_utc(row.event_time),
            chunk_count=int(row.chunk_count),
            version=int(row.version),
            lexically_indexed=row.lexically_indexed,
            created_at=row.created_at,
            updated_at=row.updated_at,
        )
        for row in rows
    ]


async def documents_with_embeddings(
    connection: AsyncConnection, project_id: str, *, after: str | None, limit: int
) -> list[tuple[StoredDocument, list[EmbeddedChunk]]]:
    """`ProjectSnapshot.embedded_documents` in the caller's transaction: `REPEATABLE READ`, its two reads one page."""
    parameters: dict[str, object] = {"project_id": project_id}
    page = _page_sql("d.project_id = :project_id", after, parameters, limit)
    documents = (
        await connection.execute(text(f"SELECT {_DOCUMENT_COLUMNS} FROM documents d WHERE {page}"), parameters)  # noqa: S608 - only our own fragments
    ).all()
    chunk_rows = (
        await connection.execute(
            text(
                f"SELECT {STORED_CHUNK_COLUMNS}, CAST(embedding AS text) AS embedding_text, embedding_model "  # noqa: S608 - constant column list
                "FROM chunks WHERE project_id = :project_id AND document_id = ANY(CAST(:ids AS text[])) "
                "ORDER BY document_id, position, chunk_id"
            ),
            {"project_id": project_id, "ids": [row.document_id for row in documents]},
        )
    ).all()
    chunks: dict[str, list[tuple[Chunk, Any]]] = defaultdict(list)
    for row in chunk_rows:
        chunks[row.document_id].append((chunk_from_row(row), row))
    exported = []
    for row in documents:
        pairs = chunks.get(row.document_id, [])
        document = StoredDocument(
            project_id=project_id,
            document_id=row.document_id,
            source=row.source,
            title=row.title,
            content_hash=row.content_hash,
            tags=tuple(row.tags),
            event_time=as_utc(row.event_time),
            metadata=json_value(row.metadata),
            chunks=tuple(chunk for chunk, _ in pairs),
            lexically_indexed=row.lexically_indexed,
            created_at=row.created_at,
            updated_at=row.updated_at,
            version=int(row.version),
        )
        # pgvector's text form `[0.1,-2e-05]` is valid JSON.
        embedded = [
            EmbeddedChunk(chunk, json.loads(chunk_row.embedding_text), chunk_row.embedding_model)
            for chunk, chunk_row in pairs
        ]
        exported.append((document, embedded))
    return exported


async def delete_documents(engine: AsyncEngine, selection: DocumentSelection, *, store_name: str) -> int:
    """Delete the selected documents in one transaction, queue their lexical deletes, move the generation on."""
    parameters: dict[str, object] = {}
    statement = DELETE_SELECTED.format(where=selection_sql(selection, parameters))
    with translate_errors(engine=store_name):
        async with project_transaction(engine, [selection.project_id], write=True) as connection:
            await lock_projects(connection, {selection.project_id})
            deleted = int((await connection.execute(text(statement), parameters)).scalar_one())
            if deleted:
                await bump_generations(connection, {selection.project_id})
    return deleted


async def project_stats(engine: AsyncEngine, project_id: str, *, store_name: str) -> ProjectStats:
    """The project's counts and lexical backlog, read in one statement; all zeros when unknown."""
    with translate_errors(engine=store_name):
        async with project_transaction(engine, [project_id]) as connection:
            row = (await connection.execute(text(SELECT_PROJECT_STATS), {"project_id": project_id})).one()
    return ProjectStats(
        project_id=project_id,
        documents=int(row.documents),
        chunks=int(row.chunks),
        lexically_indexed=int(row.lexically_indexed),
        pending=int(row.pending),
        oldest_pending_age_s=float(row.oldest_pending_age_s),
        last_write_at=row.last_write_at,
    )


GRANTED_PROJECT_IDS: Final = (
    "SELECT p.project_id FROM unnest(CAST(:project_ids AS text[])) AS p(project_id) "
    "WHERE EXISTS (SELECT 1 FROM documents d WHERE d.project_id = p.project_id)"
)
"""Which of the given projects hold a document: one primary-key probe each, whatever the other projects hold."""


async def project_ids(engine: AsyncEngine, *, among: Collection[str] | None, store_name: str) -> list[str]:
    """The id of every project that holds at least one document (only of `among`, when given), sorted.

    Every project is the maintenance scope's (`list projects`: reindex of every project, an operator's token
    for `"*"`); the projects a token names are read in their own scope, so the policies hold that statement too.
    """
    with translate_errors(engine=store_name):
        if among is None:
            async with all_projects_transaction(engine, reason="list projects") as connection:
                result = await connection.execute(text(PROJECT_IDS))
                return [str(row[0]) for row in result]
        if not among:
            return []
        async with project_transaction(engine, among) as connection:
            result = await connection.execute(text(GRANTED_PROJECT_IDS), {"project_ids": sorted(set(among))})
            return sorted(str(row[0]) for row in result)


SELECT_ONE_EMBEDDING_MODEL: Final = "SELECT embedding_model FROM chunks LIMIT 1"


async def stored_embedding_model(engine: AsyncEngine, *, store_name: str) -> str | None:
    """The model one stored chunk (any) was embedded with; None when no chunk is stored.

    One row, not all of them: at start-up, to refuse a model that is not the one the stored vectors came
    from (every chunk then is the old model's), at a cost that does not grow with the table.
    """
    with translate_errors(engine=store_name):
        async with all_projects_transaction(engine, reason="stored embedding model") as connection:
            model: str | None = (await connection.execute(text(SELECT_ONE_EMBEDDING_MODEL))).scalar_one_or_none()
    return model


async def lock_projects(connection: AsyncConnection, project_ids: set[str]) -> None:
    """Take the projects' write locks (`LOCK_PROJECTS`) before anything else in a write transaction."""
    await connection.execute(
        text(LOCK_PROJECTS), {"namespace": PROJECT_LOCK_NAMESPACE, "projects": sorted(project_ids)}
    )
