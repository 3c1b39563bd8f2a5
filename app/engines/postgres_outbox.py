"""The lexical outbox as its workers drain it: claim, release, complete, count.

Functions over the `AsyncEngine` that `PostgresDocumentStore` delegates to; their statements are in
`app.engines.postgres_outbox_sql`. A write queues its documents in its own transaction (`app.engines.postgres`).

Contracts shared by every function here:
- An entry is one document awaiting lexical indexing, at the `version` of its latest change.
- A claim leases its entries for `lease_s`: other workers, in any process, leave them until the lease runs out,
  so a crashed claimer's entries come back. Claiming does not dequeue: `complete_outbox` does;
  `release_outbox` gives entries back early.
- Completing a claimed version leaves a newer change queued.
- Driver errors become `EngineError`s naming `store_name` (`app.engines.postgres_errors.translate_errors`).
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from sqlalchemy import text

from app.domain.models import Chunk, DocumentChunks, OutboxStats
from app.engines import postgres_catalog, postgres_versions
from app.engines.postgres_errors import translate_errors
from app.engines.postgres_outbox_sql import (
    CLAIM_QUEUED,
    COMPLETE_OUTBOX,
    RELEASE_CLAIMS,
    SELECT_OUTBOX_STATS,
    SELECT_QUEUED_CHUNKS,
)
from app.engines.postgres_rows import chunk_from_row, outbox_parameters
from app.engines.postgres_scope import all_projects_transaction, project_transaction

if TYPE_CHECKING:
    from collections.abc import Sequence

    from sqlalchemy.ext.asyncio import AsyncEngine


async def claim_outbox(engine: AsyncEngine, *, limit: int, lease_s: float, store_name: str) -> list[DocumentChunks]:
    """Lease up to `limit` queued documents no other worker holds, projects in turns, with their chunks.

    The chunks are read after the claim committed, so each is at least as new as its `outbox_version`.
    A deleted document comes back with no chunks.
    """
    if limit <= 0:
        return []
    with translate_errors(engine=store_name):
        async with all_projects_transaction(engine, reason="drain outbox", write=True) as connection:
            result = await connection.execute(text(CLAIM_QUEUED), {"limit": limit, "lease_s": lease_s})
            queued = sorted(result.all(), key=lambda row: row.version)
        if not queued:
            return []
        async with project_transaction(engine, {row.project_id for row in queued}) as connection:
            chunk_rows = (
                await connection.execute(
                    text(SELECT_QUEUED_CHUNKS),
                    {
                        "projects": [row.project_id for row in queued],
                        "documents": [row.document_id for row in queued],
                    },
                )
            ).all()
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


async def release_outbox(engine: AsyncEngine, documents: Sequence[DocumentChunks], *, store_name: str) -> None:
    """End the lease of these claimed entries (their indexing failed): any worker may take them again."""
    if not documents:
        return
    with translate_errors(engine=store_name):
        projects = {document.project_id for document in documents}
        async with project_transaction(engine, projects, write=True) as connection:
            await connection.execute(text(RELEASE_CLAIMS), outbox_parameters(documents))


async def complete_outbox(engine: AsyncEngine, documents: Sequence[DocumentChunks], *, store_name: str) -> None:
    """Drop these documents' outbox entries at or below their claimed version; mark their chunks indexed.

    A newer entry (changed after the claim) stays queued and its chunks stay unmarked. Without
    `outbox_version`, any queued version is completed.
    """
    if not documents:
        return
    with translate_errors(engine=store_name):
        projects = {document.project_id for document in documents}
        async with project_transaction(engine, projects, write=True) as connection:
            await postgres_catalog.lock_projects(connection, projects)
            await connection.execute(text(COMPLETE_OUTBOX), outbox_parameters(documents))
            # The lexical leg now answers differently: cached answers of these projects are stale.
            await postgres_versions.bump_generations(connection, projects)


async def outbox_stats(engine: AsyncEngine, *, through: int | None, store_name: str) -> OutboxStats:
    """Return how many documents await lexical indexing (queued by `through`), how long the oldest has waited."""
    with translate_errors(engine=store_name):
        async with all_projects_transaction(engine, reason="outbox stats") as connection:
            row = (await connection.execute(text(SELECT_OUTBOX_STATS), {"through": through})).one()
    return OutboxStats(int(row.backlog), float(row.oldest_age_s), newest_version=int(row.newest_version))
