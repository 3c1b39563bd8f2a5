"""The documents' write locks seen from a write: is the `lock_documents` block around it still holding them?

`PostgresDocumentStore.lock_documents` takes transaction-level advisory locks (`LOCK_DOCUMENTS`) on a
connection of its own, and the block's reads and writes run on other connections. A PostgreSQL restart
inside the block ends that connection and frees the locks, while a write after it, on a fresh connection,
still commits: another writer of the same document could have run in between, and a delete could be undone
by a write that began before it. So a write inside a block first tries each of its documents' locks in its
own transaction: one it gets was no longer held by the block, and the write is refused, nothing written.
"""

from __future__ import annotations

import contextlib
from contextvars import ContextVar
from typing import TYPE_CHECKING, Final

from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from app.domain.errors import EngineUnavailableError
from app.engines.postgres_sql import LOCK_DOCUMENTS

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterable

    from sqlalchemy.ext.asyncio import AsyncConnection

    from app.domain.document_versions import DocumentKey

TAKE_FREED_DOCUMENT_LOCKS: Final = (
    "SELECT count(*) FROM (SELECT DISTINCT hashtextextended(name, 0) AS key "
    "FROM unnest(CAST(:names AS text[])) AS name) AS wanted WHERE pg_try_advisory_xact_lock(key)"
)
"""How many of the named documents' locks (`LOCK_DOCUMENTS`' keys) no other session holds; takes those.

Never waits: a lock another session holds is simply not counted. Taken ones last until the transaction ends."""

_held: ContextVar[frozenset[str]] = ContextVar("poimen_document_locks_held", default=frozenset())


def lock_name(key: DocumentKey) -> str:
    """The name `LOCK_DOCUMENTS` hashes into a document's advisory lock key."""
    project_id, document_id = key
    return f"{project_id}\x1f{document_id}"


@contextlib.asynccontextmanager
async def holding(connection: AsyncConnection, names: list[str]) -> AsyncIterator[None]:
    """Hold the named documents' locks on `connection` for the block; the writes inside it check them.

    The block ends by rolling the connection's transaction back, which frees them; a connection that died
    took them with it, and what the block committed meanwhile stands (before, its end failed, a 503 for a
    stored write).
    """
    await connection.execute(text(LOCK_DOCUMENTS), {"names": names})
    token = _held.set(_held.get() | frozenset(names))
    try:
        yield
    finally:
        _held.reset(token)
        with contextlib.suppress(DBAPIError):
            await connection.rollback()


async def check_still_held(connection: AsyncConnection, keys: Iterable[DocumentKey], *, engine: str) -> None:
    """Raise `EngineUnavailableError` when a lock the enclosing block took on one of `keys` is free now.

    Run first in a write transaction (after the project locks); a write outside any block is not checked.
    """
    names = sorted({name for key in keys if (name := lock_name(key)) in _held.get()})
    if not names:
        return
    freed = (await connection.execute(text(TAKE_FREED_DOCUMENT_LOCKS), {"names": names})).scalar_one()
    if freed:
        msg = (
            f"{engine} lost its document locks during the write (restarted or the lock connection cut off); "
            "nothing was written"
        )
        raise EngineUnavailableError(msg, engine=engine)
