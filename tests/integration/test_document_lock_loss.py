"""A document write whose `lock_documents` block outlived its locks: PostgreSQL restarted inside the block.

The locks are transaction-level advisory locks on the block's own connection, and a write runs on another
one: a restart ends the first, frees the locks, and the write's connection (a fresh one) still commits.
Found by stopping the embedded PostgreSQL during `POST /v1/projects/{p}/documents`: it was revived while the
batch was embedded, the batch was committed without its locks, then the block's end failed on the dead
connection and the client got a 503 for a write that was stored (a retry with `If-Match` then got a 409).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from app.domain.errors import EngineUnavailableError
from app.engines.embedded_postgres import EmbeddedPostgres
from app.engines.migrate import run_migrations
from app.engines.pgvector import create_postgres_engine
from app.engines.postgres import PostgresDocumentStore
from tests.contract.document_store import entry

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture
async def restartable() -> AsyncIterator[tuple[EmbeddedPostgres, PostgresDocumentStore]]:
    """A PostgreSQL of the test's own (restarting it hurts nobody) and a store on a fresh engine over it."""
    root = Path(tempfile.mkdtemp(prefix="poimen-locks-"))  # outside pytest's 0700 root: `pgserver` reaches it
    root.chmod(0o755)
    server = EmbeddedPostgres(root / "pg")
    url = server.start()
    engine = None
    try:
        run_migrations(url, embedding_dimensions=384)
        engine = create_postgres_engine(url, pool_size=4)
        yield server, PostgresDocumentStore(engine)
    finally:
        if engine is not None:
            await engine.dispose()
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


def restart(server: EmbeddedPostgres) -> None:
    server.stop()
    server.start()


async def test_a_write_after_its_document_locks_died_writes_nothing(
    restartable: tuple[EmbeddedPostgres, PostgresDocumentStore],
) -> None:
    server, store = restartable
    with pytest.raises(EngineUnavailableError, match="lost its document locks"):  # noqa: PT012 - the block is the subject
        async with store.lock_documents([("p", "a")]):
            restart(server)  # another writer of ("p", "a") could take its lock from here on
            await store.save_documents([entry("p", "a", 1)])

    assert await store.get_document("p", "a") is None
    assert await store.document_states([("p", "a")]) == {}


async def test_a_write_committed_under_its_locks_stands_when_the_lock_connection_dies_after_it(
    restartable: tuple[EmbeddedPostgres, PostgresDocumentStore],
) -> None:
    server, store = restartable
    async with store.lock_documents([("p", "a")]):
        versions = await store.save_documents([entry("p", "a", 1)])
        restart(server)  # the locks end with their connection: nothing is left to release

    stored = await store.get_document("p", "a")
    assert stored is not None
    assert stored.version == versions["p", "a"]
