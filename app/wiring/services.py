"""The composition root: builds the services of one process from its settings and engines.

The HTTP app's lifespan, the CLI and the evaluation all get their services here, so each is built one way.
"""

from __future__ import annotations

import asyncio
import logging
import time
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.auth.tokens import TokenVerifier
from app.domain.errors import SearchServiceError
from app.domain.models import OutboxStats
from app.engines.openfeature_flags import OpenFeatureKnobs
from app.engines.openfeature_provider import build_provider, definitions_gate
from app.ingestion.catalog import ProjectCatalog
from app.ingestion.chunking import ChunkingPolicy
from app.ingestion.outbox import OutboxWorker
from app.ingestion.pipeline import IngestionPipeline
from app.observability.metrics import LEXICAL_OUTBOX_BACKLOG, LEXICAL_OUTBOX_OLDEST_AGE_SECONDS, metrics_enabled
from app.search.cache import QueryCache
from app.search.calls import outcome_size_bytes
from app.search.flags import FlagStore
from app.search.rate_limit import CallerRateLimit
from app.search.service import SearchService
from app.wiring.engines import Engines, open_engines
from app.wiring.key_files import KeyFileWatcher
from app.wiring.rerankers import build_second_stage
from app.wiring.vocabulary import build_query_optimizer

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

    from app.config import Settings
    from app.search.calls import SearchOutcome
    from app.search.knob_source import FlagSource
logger = logging.getLogger("poimen.wiring")

BACKLOG_REFRESH_S = 5.0
OUTBOX_STOP_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class Services:
    """Everything one serving process runs on; built and torn down by `open_services`."""

    settings: Settings
    engines: Engines
    flags: FlagSource
    cache: QueryCache[SearchOutcome]
    outbox: OutboxWorker
    search: SearchService
    pipeline: IngestionPipeline
    catalog: ProjectCatalog
    verifier: TokenVerifier
    rate_limit: CallerRateLimit
    refused_auth_limit: CallerRateLimit
    """Buckets of refused authentications by client address (`app/api/guards.py`), apart from callers' buckets."""


def build_pipeline(
    settings: Settings, engines: Engines, *, on_written: Callable[[str], None] | None = None
) -> IngestionPipeline:
    """The ingestion pipeline with the configured chunking policy."""
    return IngestionPipeline(
        store=engines.store,
        embedder=engines.embedder,
        policy=ChunkingPolicy.from_settings(settings),
        embed_timeout_s=settings.ingest_embed_timeout_s,
        on_written=on_written,
    )


def stats_while_unreadable(last: OutboxStats, elapsed_s: float) -> OutboxStats:
    """What the outbox holds `elapsed_s` after `last` was read, while the document store cannot be read.

    Nothing drains the outbox while its store is down (the worker reads it from there), so every entry read
    last time is still queued and the oldest has waited `elapsed_s` longer: a lower bound of the true age.
    A frozen age hid an outage with a backlog from `PoimenLexicalOutboxLagging` for as long as it lasted.
    """
    if last.backlog == 0:
        return last
    return OutboxStats(backlog=last.backlog, oldest_age_s=last.oldest_age_s + max(elapsed_s, 0.0))


async def _refresh_backlog_gauge(engines: Engines) -> None:
    """Refresh the outbox gauges every `BACKLOG_REFRESH_S`; log when the store stops answering, and when it is back.

    A line per refresh was 12 a minute for as long as PostgreSQL stayed down, next to the failed requests'
    own lines; the outage is one line here (and one when it ends). While the store cannot be read the backlog
    keeps its last value and the oldest entry's age keeps growing (`stats_while_unreadable`).
    """
    loop = asyncio.get_running_loop()
    last: tuple[OutboxStats, float] | None = None  # the last stats read, and the loop time they were read at
    unavailable = False
    while metrics_enabled():
        try:
            stats = await engines.store.outbox_stats()
        except SearchServiceError as error:
            if last is not None:
                LEXICAL_OUTBOX_OLDEST_AGE_SECONDS.set(
                    stats_while_unreadable(last[0], loop.time() - last[1]).oldest_age_s
                )
            if not unavailable:
                logger.warning(
                    "outbox backlog unavailable until the document store answers (the backlog gauge keeps its "
                    "last value, the oldest entry's age keeps growing): %s",
                    error.message,
                )
            unavailable = True
        else:
            if unavailable:
                logger.info("outbox backlog readable again: %d documents queued", stats.backlog)
            unavailable = False
            last = (stats, loop.time())
            LEXICAL_OUTBOX_BACKLOG.set(stats.backlog)
            LEXICAL_OUTBOX_OLDEST_AGE_SECONDS.set(stats.oldest_age_s)
        await asyncio.sleep(BACKLOG_REFRESH_S)


def build_flag_source(settings: Settings) -> FlagSource:
    """The knobs' source `FLAGS_PROVIDER` selects: the flags file over env (default) or an OpenFeature provider."""
    if settings.flags_provider == "openfeature":
        gate = definitions_gate(settings)
        provider = build_provider(settings, definitions_path=gate.staging if gate is not None else None)
        return OpenFeatureKnobs(settings, provider=provider, definitions=gate)
    return FlagStore(settings, path=settings.poimen_flags_file, poll_interval_s=settings.flags_poll_interval_s)


@asynccontextmanager
async def open_services(
    settings: Settings, *, engines: Engines | None = None, query_cache_clock: Callable[[], float] = time.monotonic
) -> AsyncIterator[Services]:
    """Open the engines (unless given), build every service, run the background work; stop it all on exit.

    `query_cache_clock` (seconds, monotonic) is what the query cache's TTL is measured on: tests move their own.

    Background work: the outbox worker, the flags source (file poller) and the outbox backlog gauge.
    Shutdown order: stop taking background work, finish in-flight batches, then close the engines.
    """
    async with AsyncExitStack() as stack:
        live = engines if engines is not None else await stack.enter_async_context(open_engines(settings))
        cache: QueryCache[SearchOutcome] = QueryCache(
            ttl_s=settings.query_cache_ttl_secs,
            max_size=settings.query_cache_max_size,
            max_bytes=settings.query_cache_max_bytes,
            size_of=outcome_size_bytes,
            clock=query_cache_clock,
        )
        flags = build_flag_source(settings)
        stack.callback(flags.close)
        worker = OutboxWorker.from_settings(settings, store=live.store, lexical=live.lexical)

        def written(_project_id: str) -> None:
            # The store moved the project's generation on with the write: the cache needs no telling.
            worker.wake()

        services = Services(
            settings=settings,
            engines=live,
            flags=flags,
            cache=cache,
            outbox=worker,
            search=SearchService.over(
                vector=live.vector,
                lexical=live.lexical,
                embedder=live.embedder,
                store=live.store,
                knobs=flags,
                cache=cache,
                second_stage=build_second_stage(settings),
                optimizer=build_query_optimizer(settings),
            ),
            pipeline=build_pipeline(settings, live, on_written=written),
            catalog=ProjectCatalog(store=live.store, on_written=written),
            verifier=TokenVerifier.from_settings(settings),
            rate_limit=CallerRateLimit(),
            refused_auth_limit=CallerRateLimit(),
        )
        background = [asyncio.create_task(flags.run()), asyncio.create_task(_refresh_backlog_gauge(live))]
        key_file = KeyFileWatcher.for_settings(settings, services.verifier)
        if key_file is not None:
            background.append(asyncio.create_task(key_file.run()))
        worker.start()
        logger.info("poimen ready: lexical=%s vector=%s", live.lexical.name, live.vector.name)
        try:
            yield services
        finally:
            await worker.stop(timeout_s=OUTBOX_STOP_TIMEOUT_S)
            await services.search.drain_shadow()
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)
