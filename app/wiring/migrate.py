"""`poimen migrate`: apply the schema to DATABASE_URL, or to the embedded server it starts for the purpose."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from app.engines.embedded_postgres import EmbeddedPostgres
from app.engines.embedder import load_embedder
from app.engines.migrate import run_migrations

if TYPE_CHECKING:
    from app.config import Settings


async def migrate(settings: Settings) -> int:
    """Bring the schema to head, sized for the configured model; return the embedding dimensions."""
    embedder = await asyncio.to_thread(load_embedder, settings.embedding_model)
    embedded = None
    database_url = settings.database_url
    if database_url is None:
        embedded = EmbeddedPostgres(settings.poimen_data_dir / "postgres")
        database_url = await asyncio.to_thread(embedded.start)
    try:
        await asyncio.to_thread(run_migrations, database_url, embedding_dimensions=embedder.dimensions)
    finally:
        if embedded is not None:
            embedded.stop()
    return embedder.dimensions
