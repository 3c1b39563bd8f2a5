"""What the CLI's `migrate`, `ingest` and `reindex` commands do, on the same engines as the server."""

from __future__ import annotations

import asyncio
import sys
from itertools import islice
from typing import TYPE_CHECKING

from tqdm import tqdm

from app.api.engines import open_engines
from app.domain.errors import EngineError, SearchServiceError
from app.engines.embedded_postgres import EmbeddedPostgres
from app.engines.embedder import load_embedder
from app.engines.migrate import run_migrations
from app.ingestion.chunking import ChunkingPolicy
from app.ingestion.outbox import OutboxWorker
from app.ingestion.pipeline import IngestionPipeline
from app.ingestion.sources import read_documents
from app.observability import record_engine_error

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from app.api.engines import Engines
    from app.config import Settings

OUTBOX_DRAIN_TIMEOUT_S = 30.0


def outbox_worker(
    settings: Settings, engines: Engines, *, on_indexed: Callable[[str], None] | None = None
) -> OutboxWorker:
    """An outbox worker over these engines with the configured batch and backoff."""
    return OutboxWorker(
        store=engines.store,
        lexical=engines.lexical,
        batch_size=settings.outbox_batch_size,
        poll_interval_s=settings.outbox_poll_interval_s,
        max_backoff_s=settings.outbox_max_backoff_s,
        on_indexed=on_indexed,
        on_error=lambda error: record_engine_error(error.engine) if isinstance(error, EngineError) else None,
    )


async def migrate(settings: Settings) -> None:
    """Apply the schema to DATABASE_URL (or the embedded server), sized for the configured model."""
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
    print(f"schema at head ({embedder.dimensions}-dimension embeddings)", file=sys.stderr)


async def _drain_or_explain(worker: OutboxWorker) -> None:
    try:
        indexed = await worker.drain(OUTBOX_DRAIN_TIMEOUT_S)
    except EngineError as error:
        print(
            f"lexical indexing deferred ({error.message}); a running server indexes the queued documents",
            file=sys.stderr,
        )
        return
    print(f"lexical index up to date ({indexed} documents indexed)", file=sys.stderr)


async def ingest(settings: Settings, *, path: Path, project: str, batch_size: int) -> int:
    """Ingest a folder or a BEIR corpus into `project`, with a progress bar; 0 on success."""
    try:
        documents = list(read_documents(path, project_id=project))
    except (OSError, ValueError, SearchServiceError) as error:
        print(f"cannot read {path}: {error}", file=sys.stderr)
        return 1
    async with open_engines(settings) as engines:
        pipeline = IngestionPipeline(
            store=engines.store, embedder=engines.embedder, policy=ChunkingPolicy.from_settings(settings)
        )
        counts = {"created": 0, "updated": 0, "unchanged": 0}
        chunks = 0
        remaining = iter(documents)
        with tqdm(total=len(documents), unit="doc", desc=f"ingest {project}") as progress:
            while batch := list(islice(remaining, batch_size)):
                try:
                    outcomes = await pipeline.ingest(batch)
                except SearchServiceError as error:
                    print(f"ingest stopped: {error.message}", file=sys.stderr)
                    return 1
                for outcome in outcomes:
                    counts[outcome.status] += 1
                    chunks += outcome.chunk_count
                progress.update(len(batch))
        print(
            f"{counts['created']} created, {counts['updated']} updated, {counts['unchanged']} unchanged;"
            f" {chunks} chunks",
            file=sys.stderr,
        )
        await _drain_or_explain(outbox_worker(settings, engines))
    return 0


async def reindex(settings: Settings, *, project: str) -> int:
    """Rebuild a project's lexical index from PostgreSQL, the source of truth; 0 on success."""
    async with open_engines(settings) as engines:
        try:
            await engines.lexical.delete_project(project)
        except EngineError as error:
            print(f"cannot clear the lexical index ({error.message}); stop the server or retry", file=sys.stderr)
            return 1
        queued = await engines.store.queue_project_for_reindex(project)
        print(f"{queued} documents queued for lexical indexing", file=sys.stderr)
        await _drain_or_explain(outbox_worker(settings, engines))
    return 0
