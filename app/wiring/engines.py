"""Opening and closing the real engines: the embedded default or external PostgreSQL / OpenSearch.

Used by the app lifespan and by the CLI, so both run the same engines.
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.config import ConfigurationError
from app.domain.catalog import DocumentSelection
from app.domain.errors import EngineError, EngineTimeoutError, EngineUnavailableError
from app.engines.embedded_postgres import EmbeddedPostgres, path_the_shell_reads
from app.engines.embedder import EmbedderOptions, canonical_model_name, load_embedder
from app.engines.migrate import check_schema_revision, run_migrations
from app.engines.pgvector import PgVectorIndex, create_postgres_engine
from app.engines.postgres import PostgresDocumentStore
from app.engines.postgres_errors import translate_errors
from app.engines.postgres_roles import ensure_runtime_role
from app.engines.tantivy_folders import refill_queued
from app.engines.tantivy_index import TantivyLexicalIndex
from app.ingestion.reindex import queue_every_project, rebuild_project
from app.wiring.deferred_embedder import DeferredEmbedder
from app.wiring.migrate import migration_lock_wait

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

    from app.config import Settings
    from app.domain.ports import DocumentStore, Embedder, LexicalIndex, VectorIndex
    from app.engines.embedder import ServingEmbedder

logger = logging.getLogger("poimen.engines")

IDLE_TRANSACTION_MARGIN_S = 60.0
"""Beyond INGEST_EMBED_TIMEOUT_S, how long a session may sit inside a transaction before PostgreSQL ends it."""
EMBEDDED_POSTGRES_CHECK_S = 2.0
"""How often the embedded PostgreSQL's postmaster is checked and, when it has exited, started again."""


@dataclass(frozen=True, slots=True)
class Engines:
    """The adapters one process uses; `close_lexical` releases the lexical index early (tests, fallbacks)."""

    embedder: Embedder
    vector: VectorIndex
    lexical: LexicalIndex
    store: DocumentStore
    embedded_postgres: EmbeddedPostgres | None = None
    close_lexical: Callable[[], Awaitable[None]] | None = None
    lexical_refill_projects: int = 0  # projects queued at open: a format upgrade emptied the index, or folders lost


async def _open_lexical(
    settings: Settings, stack: AsyncExitStack, store: DocumentStore
) -> tuple[LexicalIndex, Callable[[], Awaitable[None]]]:
    if settings.opensearch_url:
        # The OpenSearch client is only needed in that mode.
        from app.engines.opensearch import OpenSearchLexicalIndex  # noqa: PLC0415
        from app.engines.opensearch_lifecycle import (  # noqa: PLC0415
            cluster_unreachable,
            create_opensearch_client,
            prepare_project_indexes,
            retire_shared_index,
        )

        client = create_opensearch_client(settings)
        stack.push_async_callback(client.close)
        index = OpenSearchLexicalIndex(
            client,
            index=settings.opensearch_index,
            timeout_s=settings.opensearch_timeout_s,
            forward_jwt=settings.opensearch_auth == "forward_jwt",
            replicas=settings.opensearch_replicas,
            # A lost or replaced project index is refilled from PostgreSQL, the source of truth; the index
            # of a project PostgreSQL holds no document of is deleted, and its loss is no loss.
            refill=lambda project_id: rebuild_project(store, project_id),
            holds_documents=lambda project_id: holds_documents(store, project_id),
            projects_with_documents=store.project_ids,
        )

        async def prepare() -> None:
            shared_index_left = await prepare_project_indexes(
                client, base=settings.opensearch_index, replicas=settings.opensearch_replicas
            )
            await index.discover_projects()  # every project index there now is known: its loss is noticed
            if shared_index_left:
                # Schema 6 and before kept every project in one index: rebuild each into its own from
                # PostgreSQL. Queued first, retired second: a crash in between queues again at the next start.
                projects = await queue_every_project(store)
                await retire_shared_index(client, base=settings.opensearch_index)
                logger.warning(
                    "opensearch shared index %s retired: %d projects queued for their own indexes",
                    settings.opensearch_index,
                    projects,
                )

        try:
            await prepare()
        except (EngineUnavailableError, EngineTimeoutError) as error:
            if not await cluster_unreachable(client):
                raise  # it answers and refuses (credentials, permissions): waiting will not cure that
            # A pod started during an OpenSearch outage (a rollout, a node drain, the HPA) crash-looped until
            # it ended; it now serves with its lexical leg degraded (`/readyz` 200 `degraded`, as a running
            # pod does in an outage) and prepares the indexes once the cluster answers.
            logger.warning(
                "opensearch unreachable at start (%s): serving with the lexical leg degraded, trying again every"
                " %.0f s",
                error.message,
                LEXICAL_PREPARE_RETRY_S,
            )
            retrying = asyncio.create_task(_prepare_when_reachable(prepare), name="opensearch-prepare")
            stack.push_async_callback(_cancelled, retrying)
        return index, client.close
    tantivy_index = TantivyLexicalIndex(
        settings.poimen_data_dir / "lexical",
        holds_documents=lambda project_id: holds_documents(store, project_id),
        projects_with_documents=store.project_ids,
        # A project's index lost or damaged under the process is refilled from PostgreSQL, the source of truth.
        refill=lambda project_id: rebuild_project(store, project_id),
    )
    stack.push_async_callback(tantivy_index.close)
    return tantivy_index, tantivy_index.close


LEXICAL_PREPARE_RETRY_S = 5.0
"""How often a replica that started while OpenSearch was unreachable tries to prepare its indexes again."""


async def _prepare_when_reachable(prepare: Callable[[], Awaitable[None]]) -> None:
    """Run `prepare` every `LEXICAL_PREPARE_RETRY_S` until it succeeds once."""
    while True:
        await asyncio.sleep(LEXICAL_PREPARE_RETRY_S)
        try:
            await prepare()
        except EngineError as error:
            logger.warning("opensearch indexes not prepared yet: %s", error.message)
            continue
        logger.info("opensearch reachable: project indexes prepared")
        return


async def holds_documents(store: DocumentStore, project_id: str) -> bool:
    """Whether the store holds a document of the project (one row read, not a count)."""
    return bool(await store.list_documents(DocumentSelection(project_id), after=None, limit=1))


async def refill_recreated_lexical_index(lexical: LexicalIndex, store: DocumentStore) -> int:
    """After an index-format upgrade emptied the embedded index, queue every project to be indexed again.

    Otherwise queue again each project whose folder is missing (lost while no process ran, or `lexical/`
    removed): it read as a project without chunks, its searches empty and not degraded, until `poimen reindex`.
    Returns how many projects were queued (0: none). A server's outbox worker indexes them; a command that
    searches drains the outbox first (`Engines.lexical_refill_projects`).
    """
    if not isinstance(lexical, TantivyLexicalIndex):
        return 0
    if not lexical.recreated:
        return len(await lexical.refill_missing_projects())
    projects = await queue_every_project(store)
    refill_queued(lexical.path)  # only now: a start that dies before this queues every project again
    logger.warning("lexical index format upgraded: %d project(s) queued for indexing from PostgreSQL", projects)
    return projects


def embedder_options(settings: Settings) -> EmbedderOptions:
    """How the embedding model is served, from the EMBEDDING_* settings."""
    return EmbedderOptions(
        backend=settings.embedding_backend,
        onnx_dir=settings.embedding_onnx_dir or settings.poimen_data_dir / "models",
        batch_size=settings.embedding_batch_size,
        threads=settings.embedding_threads,
        query_threads=settings.embedding_query_threads,
        query_max_batch=settings.embedding_query_max_batch,
        batch_wait_ms=settings.embedding_batch_wait_ms,
        query_cache_size=settings.embedding_query_cache_size,
    )


@asynccontextmanager
async def open_engines(settings: Settings, *, load_model_at_start: bool = True) -> AsyncIterator[Engines]:
    """Start or connect every engine, migrate in embedded mode, and close them all on exit.

    Without `load_model_at_start` (a command that moves or indexes stored vectors and embeds nothing),
    the embedder is a `DeferredEmbedder`: the model loads at the first embedding, if one ever comes.
    """
    async with AsyncExitStack() as stack:
        settings.poimen_data_dir.mkdir(parents=True, exist_ok=True)
        embedded: EmbeddedPostgres | None = None
        database_url = settings.database_url
        # The model loads in a thread while PostgreSQL starts: both take about a second.
        model_task = asyncio.create_task(_start_embedder(settings, load_model_at_start=load_model_at_start))
        if database_url is None:
            embedded = EmbeddedPostgres(settings.embedded_postgres_dir)
            database_url = await asyncio.to_thread(embedded.start)
            stack.callback(embedded.stop)
            logger.info("embedded PostgreSQL started under %s", embedded.data_dir)
            # Cancelled before the handle is stopped (an exit stack unwinds last in, first out).
            stack.push_async_callback(_cancelled, asyncio.create_task(_keep_running(embedded)))
        embedder = await model_task
        stack.callback(embedder.close)
        if embedder.dimensions != settings.embedding_dimensions:
            msg = (
                f"EMBEDDING_DIMENSIONS={settings.embedding_dimensions} but {settings.embedding_model} embeds in "
                f"{embedder.dimensions} dimensions: set EMBEDDING_DIMENSIONS={embedder.dimensions}"
            )
            raise ConfigurationError(msg)
        if load_model_at_start:
            # The first encode pays for lazy initialisation (~0.3 s); pay it now, not on a caller's query.
            await embedder.embed_query("warm up")
        if embedded is not None:
            # Kubernetes migrates in a Job (`poimen migrate`); the embedded default migrates itself.
            with translate_errors(engine="postgres"):  # a server killed just now: unavailable, not a traceback
                await asyncio.to_thread(
                    run_migrations,
                    database_url,
                    embedding_dimensions=settings.embedding_dimensions,
                    lock_wait=migration_lock_wait(settings),
                )
            # Migrated as the superuser, served as a role the row-level security policies hold.
            database_url = await ensure_runtime_role(database_url)
        engine = create_postgres_engine(
            database_url,
            pool_size=settings.database_pool_size,
            hnsw_ef_search=settings.hnsw_ef_search,
            # A write holds its documents' locks while it embeds (up to INGEST_EMBED_TIMEOUT_S): not cut short.
            idle_transaction_timeout_s=settings.ingest_embed_timeout_s + IDLE_TRANSACTION_MARGIN_S,
        )
        stack.push_async_callback(engine.dispose)
        store = PostgresDocumentStore(engine, outbox_lease_s=settings.outbox_lease_s)
        if embedded is not None or await check_schema_revision(engine):
            refuse_another_model(await store.stored_embedding_model(), serving=embedder.model_name)
        else:
            logger.warning("the database has no schema yet: requests fail until `poimen migrate` has run against it")
        lexical, close_lexical = await _open_lexical(settings, stack, store)
        refill_projects = await refill_recreated_lexical_index(lexical, store)
        yield Engines(
            embedder=embedder,
            vector=PgVectorIndex(engine, ef_search=settings.hnsw_ef_search),
            lexical=lexical,
            store=store,
            embedded_postgres=embedded,
            close_lexical=close_lexical,
            lexical_refill_projects=refill_projects,
        )


def embedded_postgres_refusal(settings: Settings) -> str | None:
    """Why the embedded PostgreSQL cannot start under `POIMEN_DATA_DIR` (a path its shell reads), or None.

    What a start raises (`EngineUnavailableError`), said before one: `poimen serve` checks it before the port
    and the model. None with `DATABASE_URL` set. Creates nothing.
    """
    if settings.database_url is not None:
        return None
    return path_the_shell_reads(EmbeddedPostgres(settings.embedded_postgres_dir).data_dir)


async def _start_embedder(settings: Settings, *, load_model_at_start: bool) -> ServingEmbedder | DeferredEmbedder:
    if not load_model_at_start:
        return DeferredEmbedder(settings, options=embedder_options(settings))
    return await asyncio.to_thread(load_embedder, settings.embedding_model, options=embedder_options(settings))


def configured_model(settings: Settings) -> tuple[str, int]:
    """The model's name as its vectors are stored, and its dimensions, as configured (no model is loaded)."""
    return canonical_model_name(settings.embedding_model), settings.embedding_dimensions


def refuse_another_model(stored: str | None, *, serving: str) -> None:
    """`ConfigurationError` when the stored vectors come from a model other than the one that embeds queries.

    A model of the same dimension passed every other check: queries were then compared with vectors of
    another space, and writes mixed two spaces in one project, without a word.
    """
    if stored is not None and stored != serving:
        msg = (
            f"EMBEDDING_MODEL: the stored chunks were embedded with {stored!r} but this service embeds with "
            f"{serving!r}; set EMBEDDING_MODEL={stored}, or use a fresh database (or POIMEN_DATA_DIR) and ingest again"
        )
        raise ConfigurationError(msg)


async def _keep_running(embedded: EmbeddedPostgres) -> None:
    """Start the embedded PostgreSQL again whenever its postmaster has exited, for as long as the engines are open.

    Killed (the OOM killer, a stray `kill -9`) it would otherwise stay down: readiness says degraded, every
    write is a 503, and only a restart of the service brought it back. The pool reconnects by itself.
    """
    while True:
        await asyncio.sleep(EMBEDDED_POSTGRES_CHECK_S)
        try:
            await asyncio.to_thread(embedded.keep_running)
        except Exception as error:  # noqa: BLE001 - a failed start is tried again next round, never fatal
            logger.warning("embedded PostgreSQL is down and did not start again: %s", type(error).__name__)


async def _cancelled(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
