"""The HTTP app: `create_app()` wires Litestar to the services the composition root builds (`app/wiring`)."""

from __future__ import annotations

import asyncio
import logging
import time
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Final

from litestar import Litestar, Request, Response, Router, get
from litestar.datastructures import State
from litestar.di import Provide
from litestar.exceptions import HTTPException, ValidationException
from litestar.openapi.config import OpenAPIConfig
from litestar.plugins.prometheus import PrometheusConfig, PrometheusController

from app.api.access_log import log_requests
from app.api.bounded_lists import prepare_probes
from app.api.console import console_router
from app.api.content_codings import refuse_coded_body
from app.api.content_negotiation import refuse_unacceptable
from app.api.cross_site import refuse_cross_site
from app.api.document_routes import DocumentController
from app.api.document_schemas import DocumentBatchIn, DocumentIn
from app.api.errors import (
    FAILURE_LOG_STATE_KEY,
    failure_log,
    http_error_handler,
    service_error_handler,
    unexpected_error_handler,
    validation_error_handler,
)
from app.api.guards import public
from app.api.method_semantics import complete_methods, sent_method
from app.api.openapi_document import complete_openapi
from app.api.operator_routes import AdminController, HealthController
from app.api.overload import guard_concurrency
from app.api.project_routes import ProjectController, ProjectListController
from app.api.request_target import reject_undecodable_target
from app.api.request_tracing import trace_requests
from app.api.response_headers import add_response_headers
from app.api.route_metrics import RouteMetrics
from app.api.search_requests import BatchSearchRequest, SearchRequest
from app.api.search_routes import SearchController
from app.api.strict_bodies import reject_lax_json
from app.api.strict_preconditions import (
    DECLARED_PRECONDITIONS_STATE_KEY,
    declared_preconditions,
    refuse_unevaluated_preconditions,
)
from app.api.strict_queries import (
    QUERY_PARAMETERS_STATE_KEY,
    declared_query_parameters,
    reject_unknown_query_parameters,
)
from app.api.unmatched_routes import count_unmatched_routes
from app.config import Settings, get_settings
from app.domain.errors import SearchServiceError
from app.ingestion.catalog import ProjectCatalog
from app.ingestion.pipeline import IngestionPipeline
from app.observability.metrics import HTTP_DURATION_BUCKETS_S, configure_metrics
from app.observability.tracing import configure_tracing
from app.search.service import SearchService
from app.wiring.services import Services, open_services

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Iterable

    from opentelemetry.sdk.trace import SpanProcessor

    from app.wiring.engines import Engines

logger = logging.getLogger("poimen.app")

MAX_REQUEST_BODY_BYTES: Final = 64 * 1024 * 1024
BOUNDED_BODIES: Final = (DocumentIn, DocumentBatchIn, SearchRequest, BatchSearchRequest)
"""The bodies whose bounded lists are counted before they are decoded (`refuse_over_bound_lists`)."""


def _services(state: State) -> Services:
    services: Services = state.services
    return services


def _search_service(state: State) -> SearchService:
    return _services(state).search


def _pipeline(state: State) -> IngestionPipeline:
    return _services(state).pipeline


def _catalog(state: State) -> ProjectCatalog:
    return _services(state).catalog


def _strict_request(settings: Settings) -> Callable[[Request[Any, Any, Any]], Awaitable[None]]:
    """Before every handler: no cross-site request without auth, no bad target, no unknown query, no coded body.

    Nor an `Accept` that admits no JSON (`refuse_unacceptable`), nor a precondition the route cannot evaluate
    (`refuse_unevaluated_preconditions`), checked before anything is read or done.

    A target is bad when its percent-escapes are not UTF-8; a body is coded when sent with a `Content-Encoding`
    or labelled a charset other than UTF-8. A JSON body is decoded strictly (`reject_lax_json`).
    """
    without_auth = settings.auth_mode == "off"

    async def before_request(request: Request[Any, Any, Any]) -> None:
        if without_auth:
            refuse_cross_site(request)
        reject_undecodable_target(request)
        refuse_unacceptable(request)
        reject_unknown_query_parameters(request)
        refuse_unevaluated_preconditions(request)
        refuse_coded_body(request)
        await reject_lax_json(request)

    return before_request


def _settings(state: State) -> Settings:
    return _services(state).settings


METRICS_PATH_PATTERN: Final = r"\A/metrics/?\Z"
"""What the HTTP metrics leave out: the scrape itself. Litestar searches a pattern anywhere in the path, so
a bare `/metrics` also left out every request of a project named `metrics-...` (`/v1/projects/metrics-a/...`)."""


class PublicPrometheusController(PrometheusController):
    """`GET /metrics`, scraped without a token (restrict it with a NetworkPolicy)."""

    opt = public

    @get(media_type="text/plain", summary="Prometheus metrics (text exposition format)")
    async def get(self) -> Response[bytes]:
        """The process's metrics in the Prometheus text exposition format (not JSON)."""
        response: Response[bytes] = await PrometheusController.get.fn(self)
        return response


def create_app(
    settings: Settings | None = None,
    *,
    engines: Engines | None = None,
    span_processors: Iterable[SpanProcessor] = (),
    on_ready: Callable[[], None] | None = None,
    query_cache_clock: Callable[[], float] = time.monotonic,
) -> Litestar:
    """Build the app. With `engines`, use those (tests); otherwise open the configured ones at start.

    `METRICS_ENABLED` and `TRACING_ENABLED` apply to the whole process (metric objects and the
    tracer are process-wide). `span_processors` receive every span besides the OTLP exporter (tests
    pass an in-memory exporter). `on_ready` runs once every engine is open (`poimen serve` greets a
    terminal with it). `query_cache_clock` is the seconds clock the query cache's TTL reads (tests pass one
    they move, so expiry is decided by the test and not by how fast the machine runs).
    """
    settings = settings or get_settings()
    configure_metrics(enabled=settings.metrics_enabled)
    tracer_provider = configure_tracing(settings, span_processors=span_processors)

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        # Built while the engines start, not on the first request that needs one.
        probes = asyncio.create_task(asyncio.to_thread(prepare_probes, *BOUNDED_BODIES))
        try:
            async with open_services(settings, engines=engines, query_cache_clock=query_cache_clock) as services:
                await probes
                app.state.services = services
                if on_ready is not None:
                    on_ready()
                yield
        finally:
            tracer_provider.shutdown()

    prometheus = PrometheusConfig(
        app_name="poimen",
        prefix="poimen_http",
        group_path=True,
        exclude=[METRICS_PATH_PATTERN],
        buckets=list(HTTP_DURATION_BUCKETS_S),
        labels={"method": sent_method},  # replaces the middleware's own: HEAD, not the GET that serves it
        middleware_class=RouteMetrics,  # a request cut before its answer is the 500 sent, not a 200
    )
    handlers: list[type | Router] = [
        SearchController,
        DocumentController,
        ProjectListController,
        ProjectController,
        AdminController,
        HealthController,
    ]
    if settings.metrics_enabled:
        handlers.append(PublicPrometheusController)
    if settings.console_enabled:
        handlers.append(console_router())
    app = Litestar(
        route_handlers=handlers,
        lifespan=[lifespan],
        dependencies={
            "services": Provide(_services, sync_to_thread=False),
            "search_service": Provide(_search_service, sync_to_thread=False),
            "pipeline": Provide(_pipeline, sync_to_thread=False),
            "catalog": Provide(_catalog, sync_to_thread=False),
            "settings": Provide(_settings, sync_to_thread=False),
        },
        exception_handlers={
            SearchServiceError: service_error_handler,
            ValidationException: validation_error_handler,
            HTTPException: http_error_handler,
            Exception: unexpected_error_handler,
        },
        before_request=_strict_request(settings),
        middleware=[prometheus.middleware] if settings.metrics_enabled else [],
        openapi_config=OpenAPIConfig(
            title="Poimen Memory Search",
            version="0.1.0",
            path="/schema",
            description="Hybrid BM25 + vector retrieval with explained scores.",
            use_handler_docstrings=True,  # each operation's description: its handler's docstring, not nothing
        ),
        request_max_body_size=MAX_REQUEST_BODY_BYTES,
        # Logging belongs to the process (`configure_logging` in `poimen serve`: JSON lines with trace ids);
        # Litestar's default config would replace the root handlers with its own plain-text format.
        logging_config=None,
        debug=False,
    )
    app.state[QUERY_PARAMETERS_STATE_KEY] = declared_query_parameters(app)
    app.state[DECLARED_PRECONDITIONS_STATE_KEY] = declared_preconditions(app)
    app.state[FAILURE_LOG_STATE_KEY] = failure_log()
    complete_openapi(
        app.openapi_schema,
        max_batch_documents=settings.max_batch_documents,
        max_document_bytes=settings.max_document_bytes,
        search_batch_max_queries=settings.search_batch_max_queries,
    )
    complete_methods(app)
    add_response_headers(app)
    if settings.metrics_enabled:
        count_unmatched_routes(app, prometheus)
    if settings.access_log_enabled:  # inside the tracing: its lines carry the request id and the server span's
        log_requests(app)
    trace_requests(app, traced=settings.tracing_enabled)
    # Shedding first: a refused request costs no routing, no metrics middleware, no span, no work.
    guard_concurrency(app, limit=settings.max_concurrent_requests, max_body_bytes=MAX_REQUEST_BODY_BYTES)
    return app
