"""A project read at one moment (`DocumentStore.project_snapshot`): one `REPEATABLE READ`, `READ ONLY` transaction.

An export paged through the project a transaction per page, each page its own moment: a document created
behind the pages read and one deleted ahead of them were both missing from it, a state that never existed.
Every read of a snapshot runs in the one transaction, so it sees the project as it stood at its first read.

What it costs: the transaction stays open for the whole export. It holds no row lock and blocks no write,
but holds `ACCESS SHARE` on `documents`, `chunks` and `lexical_outbox` (a migration's `ALTER TABLE` waits
for it, `MIGRATION_LOCK_TIMEOUT_S` per try, and names it when it gives up) and keeps VACUUM from removing
rows deleted after it began. A snapshot left idle longer than the session's
`idle_in_transaction_session_timeout` (an export whose reader stopped reading) is ended by PostgreSQL, and
its next read fails: it never holds the database for longer.
"""

from __future__ import annotations

from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING

from app.engines.postgres_catalog import documents_with_embeddings, listed_documents
from app.engines.postgres_errors import translate_errors
from app.engines.postgres_scope import project_transaction

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

    from app.domain.catalog import DocumentSelection, DocumentSummary
    from app.domain.models import EmbeddedChunk, StoredDocument


class PostgresProjectSnapshot:
    """`ProjectSnapshot` over one open transaction, which the row-level security scope keeps to its project."""

    def __init__(self, connection: AsyncConnection, *, store_name: str) -> None:
        self._connection = connection
        self._store_name = store_name

    async def list_documents(
        self, selection: DocumentSelection, *, after: str | None, limit: int
    ) -> list[DocumentSummary]:
        """As `PostgresDocumentStore.list_documents`, at the snapshot's moment."""
        with translate_errors(engine=self._store_name):
            return await listed_documents(self._connection, selection, after=after, limit=limit)

    async def embedded_documents(
        self, project_id: str, *, after: str | None, limit: int
    ) -> list[tuple[StoredDocument, list[EmbeddedChunk]]]:
        """Up to `limit` documents by id after `after`, each with its chunks and their stored embeddings."""
        with translate_errors(engine=self._store_name):
            return await documents_with_embeddings(self._connection, project_id, after=after, limit=limit)


@asynccontextmanager
async def project_snapshot(
    engine: AsyncEngine, project_id: str, *, store_name: str
) -> AsyncIterator[PostgresProjectSnapshot]:
    """The project at one moment, until the context ends; the transaction is rolled back however it ends."""
    async with AsyncExitStack() as stack:
        # Driver errors of the transaction are translated, not those of the caller's body (an export's full disk).
        with translate_errors(engine=store_name):
            transaction = project_transaction(engine, [project_id], isolation_level="REPEATABLE READ", read_only=True)
            connection = await stack.enter_async_context(transaction)
        yield PostgresProjectSnapshot(connection, store_name=store_name)
        with translate_errors(engine=store_name):
            await stack.aclose()
