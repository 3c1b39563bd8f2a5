"""Metrics, traces and logs: every Prometheus metric object, tracer and JSON log setup, `phase()` spans.

Metric names are a contract with the Grafana dashboard (`dashboards/`): change one only together with it.
All metrics live in prometheus-client's default registry. Label values come from the bounded sets
below; anything else is recorded as `"other"`, so no caller input can grow the number of series.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Final

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from prometheus_client import Counter, Gauge, Histogram

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Mapping, Sequence
    from typing import TextIO

    from opentelemetry.sdk.trace import SpanProcessor
    from opentelemetry.util.types import AttributeValue

    from app.config import Settings

OTHER: Final = "other"
"""The label value recorded for anything outside a label's bounded set."""

STAGES: Final = frozenset({"optimize", "embed", "semantic", "lexical", "fusion", "rerank", "total"})
STRATEGIES: Final = frozenset({"hybrid", "semantic", "lexical", "cascading"})
ARMS: Final = frozenset({"hybrid", "semantic", "control"})
OUTCOMES: Final = frozenset({"ok", "degraded", "error", "rejected"})
CACHE_RESULTS: Final = frozenset({"hit", "miss"})
FALLBACK_REASONS: Final = frozenset(
    {"lexical_unavailable", "lexical_timeout", "semantic_unavailable", "semantic_timeout", "embedder_unavailable"}
)
ENGINES: Final = frozenset({"pgvector", "postgres", "tantivy", "opensearch", "embedder"})
INGEST_STATUSES: Final = frozenset({"created", "updated", "unchanged", "deleted"})

# Stage names the searcher or route may use for the same stage; folded onto the dashboard's names.
_STAGE_ALIASES: Final = {
    "optimizer": "optimize",
    "optimization": "optimize",
    "embedding": "embed",
    "vector": "semantic",
    "fuse": "fusion",
    "reranking": "rerank",
}
# Engine (adapter) names mapped to the leg whose fallback reason they cause.
_ENGINE_LEGS: Final = {
    "tantivy": "lexical",
    "opensearch": "lexical",
    "lexical": "lexical",
    "pgvector": "semantic",
    "postgres": "semantic",
    "vector": "semantic",
    "semantic": "semantic",
    "embedder": "embedder",
}

SPAN_ATTRIBUTE_STRATEGY: Final = "search.strategy"
SPAN_ATTRIBUTE_ARM: Final = "search.arm"
SPAN_ATTRIBUTE_OUTCOME: Final = "search.outcome"
SPAN_ATTRIBUTE_RESULT_COUNT: Final = "search.result_count"
SPAN_ATTRIBUTE_DEGRADED_REASONS: Final = "search.degraded_reasons"
SPAN_ATTRIBUTE_CACHED: Final = "search.cached"
SPAN_ATTRIBUTE_ENGINE_ERROR: Final = "search.engine_error"
SPAN_REQUEST: Final = "search.request"
SPAN_OPTIMIZE: Final = "search.optimize"

_STAGE_BUCKETS_S: Final = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
_RESULT_COUNT_BUCKETS: Final = (0.0, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0)
_OVERLAP_BUCKETS: Final = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)

QUERY_STAGE_DURATION_SECONDS: Final = Histogram(
    "poimen_query_stage_duration_seconds",
    "Seconds spent in one stage of a search query (stage=total is the whole search).",
    ["stage", "strategy", "arm"],
    buckets=_STAGE_BUCKETS_S,
)
QUERIES_TOTAL: Final = Counter(
    "poimen_queries_total",
    "Search queries answered, by strategy, rollout arm and outcome.",
    ["strategy", "arm", "outcome"],
)
QUERY_CACHE_REQUESTS_TOTAL: Final = Counter(
    "poimen_query_cache_requests_total",
    "Query cache lookups, by result (hit or miss).",
    ["result"],
)
FALLBACKS_TOTAL: Final = Counter(
    "poimen_fallbacks_total",
    "Searches answered without one of their legs, by reason.",
    ["reason"],
)
ENGINE_ERRORS_TOTAL: Final = Counter(
    "poimen_engine_errors_total",
    "Calls to an engine that failed, by engine.",
    ["engine"],
)
INGESTED_DOCUMENTS_TOTAL: Final = Counter(
    "poimen_ingested_documents_total",
    "Documents written by ingestion, by what happened to them.",
    ["status"],
)
INGESTED_CHUNKS_TOTAL: Final = Counter(
    "poimen_ingested_chunks_total",
    "Chunks stored by ingestion.",
)
LEXICAL_OUTBOX_BACKLOG: Final = Gauge(
    "poimen_lexical_outbox_backlog",
    "Documents stored but not yet indexed by the lexical engine.",
)
QUERY_RESULTS: Final = Histogram(
    "poimen_query_results",
    "Number of hits a search returned.",
    ["strategy"],
    buckets=_RESULT_COUNT_BUCKETS,
)
FLAGS_RELOAD_ERRORS_TOTAL: Final = Counter(
    "poimen_flags_reload_errors_total",
    "Flags files rejected (parse error, unknown key, invalid value); the last good flags stay in force.",
)
FLAGS_VERSION: Final = Gauge(
    "poimen_flags_version",
    "Version of the flags in force; increases by one on every successful change.",
)
ROLLOUT_HYBRID_PERCENT: Final = Gauge(
    "poimen_rollout_hybrid_percent",
    "Effective HYBRID_ROLLOUT_PERCENT: the share of callers (0-100) sent to the hybrid arm.",
)
ROLLOUT_ASSIGNMENTS_TOTAL: Final = Counter(
    "poimen_rollout_assignments_total",
    "Requests assigned to a rollout arm, by arm.",
    ["arm"],
)
SHADOW_OVERLAP_AT_10: Final = Histogram(
    "poimen_shadow_overlap_at_10",
    "Overlap@10 (0..1) between the served arm's hits and the shadow arm's hits.",
    buckets=_OVERLAP_BUCKETS,
)


class _MetricsSwitch:
    """Whether the `record_*` helpers and `phase(stage=...)` touch the metric objects at all."""

    enabled: bool = True


def configure_metrics(*, enabled: bool) -> None:
    """Turn recording on or off for this process (`METRICS_ENABLED`).

    Off, every `record_*` helper and `phase(stage=...)` returns without touching a metric object, so
    a service with metrics disabled pays nothing for them; `/metrics` then only shows zeros.
    """
    _MetricsSwitch.enabled = enabled


def metrics_enabled() -> bool:
    """Whether metrics are recorded in this process (see `configure_metrics`)."""
    return _MetricsSwitch.enabled


def bounded(value: str, allowed: frozenset[str]) -> str:
    """Return `value` lower-cased when it is in `allowed`, else `"other"`: label values stay bounded."""
    lowered = value.strip().lower()
    return lowered if lowered in allowed else OTHER


def stage_label(stage: str) -> str:
    """Map a stage name (including aliases such as `fuse` or `embedding`) to its bounded label value."""
    lowered = stage.strip().lower()
    return bounded(_STAGE_ALIASES.get(lowered, lowered), STAGES)


def fallback_reason(reason: str) -> str:
    """Map a degraded reason to its bounded label value.

    Accepts the label values themselves (`lexical_timeout`) and `<engine or leg><sep><kind>` forms
    such as `opensearch: timeout` or `pgvector_unavailable`: a kind mentioning "timeout" is a timeout,
    any other kind is unavailability. Anything unrecognised is `"other"`.
    """
    normalized = reason.strip().lower().replace(":", "_").replace("-", "_").replace(" ", "_")
    if normalized in FALLBACK_REASONS:
        return normalized
    source, _, kind = normalized.partition("_")
    leg = _ENGINE_LEGS.get(source)
    if leg is None:
        return OTHER
    candidate = f"{leg}_timeout" if "timeout" in kind else f"{leg}_unavailable"
    return candidate if candidate in FALLBACK_REASONS else OTHER


def _initialise_label_sets() -> None:
    # Counters with known label sets start at 0, so rate() and the dashboard see them before the first event.
    for strategy in STRATEGIES:
        for arm in ARMS:
            for outcome in OUTCOMES:
                QUERIES_TOTAL.labels(strategy=strategy, arm=arm, outcome=outcome)
    for result in CACHE_RESULTS:
        QUERY_CACHE_REQUESTS_TOTAL.labels(result=result)
    for reason in FALLBACK_REASONS:
        FALLBACKS_TOTAL.labels(reason=reason)
    for engine in ENGINES:
        ENGINE_ERRORS_TOTAL.labels(engine=engine)
    for status in INGEST_STATUSES:
        INGESTED_DOCUMENTS_TOTAL.labels(status=status)
    for arm in ("hybrid", "semantic"):
        ROLLOUT_ASSIGNMENTS_TOTAL.labels(arm=arm)


_initialise_label_sets()


def record_search(  # noqa: PLR0913 - one call records everything a finished search tells the dashboard
    *,
    strategy: str,
    arm: str,
    outcome: str,
    stage_ms: Mapping[str, float],
    degraded_reasons: Sequence[str] = (),
    result_count: int,
) -> None:
    """Record a finished search: stage seconds, the query counter, fallbacks and the result count.

    `stage_ms` maps stage names (see `stage_label`) to milliseconds; negative values are ignored.
    Also sets strategy, arm, outcome, result count and degraded reasons on the current span, which
    is the request span when called from the route.
    """
    if _MetricsSwitch.enabled:
        strategy_value = bounded(strategy, STRATEGIES)
        arm_value = bounded(arm, ARMS)
        for stage, elapsed_ms in stage_ms.items():
            if elapsed_ms >= 0:
                QUERY_STAGE_DURATION_SECONDS.labels(
                    stage=stage_label(stage), strategy=strategy_value, arm=arm_value
                ).observe(elapsed_ms / 1000.0)
        QUERIES_TOTAL.labels(strategy=strategy_value, arm=arm_value, outcome=bounded(outcome, OUTCOMES)).inc()
        for reason in degraded_reasons:
            FALLBACKS_TOTAL.labels(reason=fallback_reason(reason)).inc()
        QUERY_RESULTS.labels(strategy=strategy_value).observe(max(result_count, 0))
    span = trace.get_current_span()
    if span.is_recording():
        span.set_attributes(
            {
                SPAN_ATTRIBUTE_STRATEGY: strategy,
                SPAN_ATTRIBUTE_ARM: arm,
                SPAN_ATTRIBUTE_OUTCOME: outcome,
                SPAN_ATTRIBUTE_RESULT_COUNT: result_count,
                SPAN_ATTRIBUTE_DEGRADED_REASONS: tuple(degraded_reasons),
            }
        )


def record_cache_lookup(*, hit: bool) -> None:
    """Count one query cache lookup as a hit or a miss."""
    if not _MetricsSwitch.enabled:
        return
    QUERY_CACHE_REQUESTS_TOTAL.labels(result="hit" if hit else "miss").inc()


def record_engine_error(engine: str) -> None:
    """Count one failed engine call; `engine` is the adapter's `name`."""
    if not _MetricsSwitch.enabled:
        return
    ENGINE_ERRORS_TOTAL.labels(engine=bounded(engine, ENGINES)).inc()


def record_ingested(*, status: str, documents: int = 1, chunks: int = 0) -> None:
    """Count `documents` ingested documents with `status` and the `chunks` they stored."""
    if not _MetricsSwitch.enabled:
        return
    INGESTED_DOCUMENTS_TOTAL.labels(status=bounded(status, INGEST_STATUSES)).inc(documents)
    if chunks > 0:
        INGESTED_CHUNKS_TOTAL.inc(chunks)


def record_rollout_assignment(arm: str) -> None:
    """Count one request assigned to a rollout arm (`hybrid` or `semantic`)."""
    if not _MetricsSwitch.enabled:
        return
    ROLLOUT_ASSIGNMENTS_TOTAL.labels(arm=bounded(arm, ARMS)).inc()


def record_shadow_overlap(overlap: float) -> None:
    """Observe overlap@10 between the served and the shadow arm, clamped to 0..1."""
    if not _MetricsSwitch.enabled:
        return
    SHADOW_OVERLAP_AT_10.observe(min(max(overlap, 0.0), 1.0))


class _TracerHolder:
    """The tracer `phase()` uses; `configure_tracing` replaces it (tests configure it more than once)."""

    tracer: trace.Tracer = trace.get_tracer("app")


def configure_tracing(
    settings: Settings,
    *,
    span_processors: Iterable[SpanProcessor] = (),
    set_global: bool = True,
) -> TracerProvider:
    """Build the tracer provider for this process and point `phase()` at it.

    Spans go to an OTLP/HTTP exporter (`OTEL_EXPORTER_OTLP_ENDPOINT`, base URL as in the OTel spec,
    e.g. `http://collector:4318`) when that setting is set, to `span_processors` when given (tests pass
    an in-memory exporter), and nowhere otherwise: spans then still carry ids into the logs. With
    `TRACING_ENABLED=false` `phase()` opens no spans at all. The caller owns the provider and calls
    `shutdown()` on it at exit, which flushes pending spans. The global provider is set only once per
    process (OpenTelemetry refuses to replace it), so Litestar's plugin and `phase()` share it.
    """
    provider = TracerProvider(resource=Resource.create({"service.name": settings.otel_service_name}))
    for processor in span_processors:
        provider.add_span_processor(processor)
    endpoint = settings.otel_exporter_otlp_endpoint
    if endpoint is not None:
        # Imported here so processes without an exporter never load protobuf and requests.
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter  # noqa: PLC0415

        traces_url = endpoint if endpoint.rstrip("/").endswith("/v1/traces") else endpoint.rstrip("/") + "/v1/traces"
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=traces_url)))
    if settings.tracing_enabled:
        _TracerHolder.tracer = provider.get_tracer("app")
        if set_global and isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
            trace.set_tracer_provider(provider)
    else:
        _TracerHolder.tracer = trace.NoOpTracer()
    return provider


@contextmanager
def phase(
    name: str,
    *,
    stage: str | None = None,
    strategy: str = "hybrid",
    arm: str = "control",
    **attributes: AttributeValue,
) -> Iterator[trace.Span]:
    """Open a child span `name` (`search.embed`, `search.engine.pgvector`, `search.fuse`) around a block.

    With `stage` set, also observes the block's seconds in `poimen_query_stage_duration_seconds`
    under (stage, strategy, arm); leave it unset for stages `record_search` already reports, or
    they count twice. An exception marks the span as failed, is recorded on it, and propagates.
    """
    started = time.perf_counter()
    with _TracerHolder.tracer.start_as_current_span(name, attributes=attributes) as span:
        try:
            yield span
        finally:
            if stage is not None and _MetricsSwitch.enabled:
                QUERY_STAGE_DURATION_SECONDS.labels(
                    stage=stage_label(stage), strategy=bounded(strategy, STRATEGIES), arm=bounded(arm, ARMS)
                ).observe(time.perf_counter() - started)


def mark_span_failed(span: trace.Span, reason: str) -> None:
    """Mark `span` as failed with `reason` (a degraded reason such as `lexical_timeout`) without an exception."""
    if span.is_recording():
        span.set_attribute(SPAN_ATTRIBUTE_ENGINE_ERROR, reason)
        span.set_status(trace.StatusCode.ERROR, reason)


class TraceContextFilter(logging.Filter):
    """Adds `trace_id` and `span_id` (hex, empty outside a span) of the current span to each record."""

    def filter(self, record: logging.LogRecord) -> bool:  # noqa: D102 - documented on the class
        context = trace.get_current_span().get_span_context()
        record.trace_id = format(context.trace_id, "032x") if context.is_valid else ""
        record.span_id = format(context.span_id, "016x") if context.is_valid else ""
        return True


# Attributes every LogRecord has; anything else was passed through `extra=` and is logged as a field.
_RECORD_ATTRIBUTES: Final = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {
    "message",
    "asctime",
    "trace_id",
    "span_id",
    "taskName",
}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: timestamp, level, logger, message, trace_id, span_id, extras, exception."""

    def format(self, record: logging.LogRecord) -> str:  # noqa: D102 - documented on the class
        entry: dict[str, object] = {
            "timestamp": datetime.fromtimestamp(record.created, tz=UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "trace_id": getattr(record, "trace_id", ""),
            "span_id": getattr(record, "span_id", ""),
        }
        entry.update((key, value) for key, value in record.__dict__.items() if key not in _RECORD_ATTRIBUTES)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


_TEXT_FORMAT: Final = "%(asctime)s %(levelname)s %(name)s [trace_id=%(trace_id)s span_id=%(span_id)s] %(message)s"


class _PoimenHandler(logging.StreamHandler):  # type: ignore[type-arg] # generic only in typeshed
    """Marks the handler `configure_logging` installed, so calling it again replaces instead of stacking."""


def configure_logging(level: str | int = "INFO", *, json: bool = True, stream: TextIO | None = None) -> None:
    """Send every log record to `stream` (stderr by default), as JSON lines or plain text.

    Each record carries the current span's trace_id and span_id. Idempotent: a second call replaces
    the handler installed by the first; handlers installed by others (pytest's) are left alone.
    """
    root = logging.getLogger()
    for handler in list(root.handlers):
        if isinstance(handler, _PoimenHandler):
            root.removeHandler(handler)
    handler = _PoimenHandler(stream if stream is not None else sys.stderr)
    handler.addFilter(TraceContextFilter())
    handler.setFormatter(JsonFormatter() if json else logging.Formatter(_TEXT_FORMAT))
    root.addHandler(handler)
    root.setLevel(level)
