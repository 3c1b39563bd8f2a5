"""HTTP-tier fixtures: the real app (`create_app`) on real engines, driven through Litestar's test client.

`api_client` is one app per test module on the session PostgreSQL and the session model, with its
own tantivy folder; tests keep apart by project id (`unique_name`). Tests that stop an engine build
their own engines with `build_engines` so the session ones stay up.

`AsyncTestClient` runs the app on an event loop of its own, in a thread (litestar#1920), so every pooled
connection is made on that loop: apps built with `BuiltEngines.app` dispose the pool there at shutdown.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest
from litestar.testing import AsyncTestClient

from app.api.app import create_app
from app.config import Settings
from app.engines.migrate import run_migrations
from app.engines.pgvector import PgVectorIndex, create_postgres_engine
from app.engines.postgres import PostgresDocumentStore
from app.engines.tantivy_index import TantivyLexicalIndex
from app.wiring.engines import Engines

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from litestar import Litestar
    from sqlalchemy.ext.asyncio import AsyncEngine

    from app.engines.embedder import ServingEmbedder


def api_settings(data_dir: Path, **overrides: Any) -> Settings:
    """Settings for a test app: embedded data under `data_dir`, fast outbox polling, no env file."""
    values: dict[str, Any] = {
        "poimen_data_dir": data_dir,
        "outbox_poll_interval_s": 0.05,
        "outbox_max_backoff_s": 0.5,
        "flags_poll_interval_s": 0.1,
        "log_json": False,
    }
    values.update(overrides)
    return Settings(_env_file=None, **values)


@dataclass(frozen=True, slots=True)
class BuiltEngines:
    """Engines for test apps, and the connection pool behind their store and vector index."""

    engines: Engines
    pool: AsyncEngine

    def app(self, settings: Settings, **options: Any) -> Litestar:
        """`create_app(settings, engines=..., **options)` that disposes the pool at shutdown, on its own loop.

        The app's connections belong to the test client's loop, which ends with the client: disposed
        later from the test's loop, they could not be closed and would leak their sockets.
        """

        async def dispose_pool() -> None:
            await self.pool.dispose()

        app = create_app(settings, engines=self.engines, **options)
        # Shutdown hooks run after the lifespan has stopped the outbox worker: nothing checks out a connection again.
        app.on_shutdown.append(dispose_pool)
        return app


@asynccontextmanager
async def build_engines(
    *, database_url: str, lexical_path: Path, embedder: ServingEmbedder
) -> AsyncIterator[BuiltEngines]:
    """Engines on an already migrated database and a fresh tantivy folder; closed on exit."""
    pool = create_postgres_engine(database_url, pool_size=4)
    lexical = TantivyLexicalIndex(lexical_path)
    engines = Engines(
        embedder=embedder,
        vector=PgVectorIndex(pool),
        lexical=lexical,
        store=PostgresDocumentStore(pool),
        close_lexical=lexical.close,
    )
    try:
        yield BuiltEngines(engines=engines, pool=pool)
    finally:
        await lexical.close()
        await pool.dispose()  # what the test itself connected, on this loop; a pool its app disposed is empty


@asynccontextmanager
async def app_client(app: Litestar) -> AsyncIterator[AsyncTestClient[Litestar]]:
    """A test client that runs the app's lifespan (outbox worker, flags) around the block."""
    async with AsyncTestClient(app=app, base_url="http://127.0.0.1") as client:
        yield client


@pytest.fixture(scope="session")
def api_postgres_url(postgres_url: str, embedder: ServingEmbedder) -> str:
    """The session PostgreSQL migrated for the real model's dimension."""
    run_migrations(postgres_url, embedding_dimensions=embedder.dimensions)
    return postgres_url


@pytest.fixture(scope="module")
async def api_client(
    api_postgres_url: str, embedder: ServingEmbedder, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[AsyncTestClient[Litestar]]:
    """The app on the session engines, one per test module."""
    data_dir = tmp_path_factory.mktemp("api")
    async with (
        build_engines(database_url=api_postgres_url, lexical_path=data_dir / "lexical", embedder=embedder) as built,
        app_client(built.app(api_settings(data_dir))) as client,
    ):
        yield client


async def wait_indexed(
    client: AsyncTestClient[Any], project: str, document_id: str, *, timeout_s: float = 10.0
) -> None:
    """Wait until the outbox has put the document into the lexical index."""
    import asyncio  # noqa: PLC0415
    import time  # noqa: PLC0415

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        response = await client.get(f"/v1/projects/{project}/documents/{document_id}")
        if response.status_code == 200 and response.json()["lexically_indexed"]:
            return
        await asyncio.sleep(0.05)
    msg = f"{document_id} not lexically indexed within {timeout_s} s"
    raise AssertionError(msg)


async def with_backup_note(client: AsyncTestClient[Litestar], project: str) -> AsyncTestClient[Litestar]:
    """`client` once `project` holds one short note on backups (a search then has something to answer)."""
    response = await client.post(
        f"/v1/projects/{project}/documents", json={"id": "backup", "text": "Nightly backups run at 02:00."}
    )
    assert response.status_code == 201
    return client
