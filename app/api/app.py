"""The composition root: `create_app()` builds engines in the lifespan and hands them to services."""

from __future__ import annotations

import asyncio
import logging
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING

from litestar import Litestar
from litestar.datastructures import State
from litestar.di import Provide
from litestar.exceptions import HTTPException, ValidationException
from litestar.openapi.config import OpenAPIConfig
from litestar.plugins.prometheus import PrometheusConfig, PrometheusController

from app.api.auth import TokenVerifier
from app.api.cli_tasks import outbox_worker
from app.api.engines import Engines, open_engines
from app.api.errors import (
    http_error_handler,
    service_error_handler,
    unexpected_error_handler,
    validation_error_handler,
)
from app.api.routes import AdminController, DocumentController, HealthController, SearchController
from app.api.search_service import SearchService
from app.config import Settings, get_settings
from app.domain.errors import SearchServiceError
from app.ingestion.chunking import ChunkingPolicy
from app.ingestion.pipeline import IngestionPipeline
from app.observability import LEXICAL_OUTBOX_BACKLOG, configure_metrics, configure_tracing, metrics_enabled
from app.operations.cache import QueryCache
from app.operations.flags import FlagStore
from app.query.optimizer import QueryOptimizer
from app.retrieval.searcher import HybridSearcher

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterable

    from opentelemetry.sdk.trace import SpanProcessor

    from app.api.schemas import SearchResponse

logger = logging.getLogger("poimen.app")

MAX_REQUEST_BODY_BYTES = 64 * 1024 * 1024
BACKLOG_REFRESH_S = 5.0


def provide_search_service(state: State) -> SearchService:
    """The search service the lifespan built."""
    service: SearchService = state.search_service
    return service


async def _refresh_backlog_gauge(engines: Engines) -> None:
    while metrics_enabled():
        try:
            LEXICAL_OUTBOX_BACKLOG.set(await engines.store.outbox_backlog())
        except SearchServiceError:
            logger.warning("outbox backlog unavailable: the document store is down")
        await asyncio.sleep(BACKLOG_REFRESH_S)


def create_app(
    settings: Settings | None = None,
    *,
    engines: Engines | None = None,
    span_processors: Iterable[SpanProcessor] = (),
) -> Litestar:
    """Build the app. With `engines`, use those (tests); otherwise open the configured ones at start.

    `METRICS_ENABLED` and `TRACING_ENABLED` apply to the whole process (metric objects and the
    tracer are process-wide). `span_processors` receive every span besides the OTLP exporter (tests
    pass an in-memory exporter).
    """
    settings = settings or get_settings()
    configure_metrics(enabled=settings.metrics_enabled)
    tracer_provider = configure_tracing(settings, span_processors=span_processors)

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            live: Engines = engines if engines is not None else await stack.enter_async_context(open_engines(settings))
            cache: QueryCache[SearchResponse] = QueryCache(
                ttl_s=settings.query_cache_ttl_secs, max_size=settings.query_cache_max_size
            )
            flags = FlagStore(settings, path=settings.poimen_flags_file, poll_interval_s=settings.flags_poll_interval_s)
            worker = outbox_worker(settings, live, on_indexed=cache.invalidate_project)

            def written(project_id: str) -> None:
                cache.invalidate_project(project_id)
                worker.wake()

            search_service = SearchService(
                searcher=HybridSearcher(vector=live.vector, lexical=live.lexical, embedder=live.embedder),
                optimizer=QueryOptimizer(),
                flags=flags,
                cache=cache,
                settings=settings,
            )
            app.state.update(
                settings=settings,
                engines=live,
                flags=flags,
                cache=cache,
                outbox=worker,
                search_service=search_service,
                verifier=TokenVerifier.from_settings(settings),
                pipeline=IngestionPipeline(
                    store=live.store,
                    embedder=live.embedder,
                    policy=ChunkingPolicy.from_settings(settings),
                    on_written=written,
                ),
            )
            background = [asyncio.create_task(flags.run()), asyncio.create_task(_refresh_backlog_gauge(live))]
            worker.start()
            logger.info("poimen ready: lexical=%s vector=%s", live.lexical.name, live.vector.name)
            try:
                yield
            finally:
                # Shutdown order: stop taking background work, finish in-flight batches, then close engines.
                await worker.stop(timeout_s=10.0)
                await search_service.drain_shadow()
                for task in background:
                    task.cancel()
                await asyncio.gather(*background, return_exceptions=True)
                tracer_provider.shutdown()

    prometheus = PrometheusConfig(app_name="poimen", prefix="poimen_http", group_path=True, exclude=["/metrics"])
    handlers: list[type] = [SearchController, DocumentController, AdminController, HealthController]
    if settings.metrics_enabled:
        handlers.append(PrometheusController)
    return Litestar(
        route_handlers=handlers,
        lifespan=[lifespan],
        dependencies={"search_service": Provide(provide_search_service, sync_to_thread=False)},
        exception_handlers={
            SearchServiceError: service_error_handler,
            ValidationException: validation_error_handler,
            HTTPException: http_error_handler,
            Exception: unexpected_error_handler,
        },
        middleware=[prometheus.middleware] if settings.metrics_enabled else [],
        openapi_config=OpenAPIConfig(
            title="Poimen Memory Search",
            version="0.1.0",
            path="/schema",
            description="Hybrid BM25 + vector retrieval with explained scores.",
        ),
        request_max_body_size=MAX_REQUEST_BODY_BYTES,
        # Logging belongs to the process (`configure_logging` in `poimen serve`: JSON lines with trace ids);
        # Litestar's default config would replace the root handlers with its own plain-text format.
        logging_config=None,
        debug=False,
    )
