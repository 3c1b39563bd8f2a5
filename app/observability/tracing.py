"""Tracing: the process's tracer provider (OTLP when configured) and `phase()` spans around search stages."""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import TYPE_CHECKING

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from app.domain.labels import ARMS
from app.observability.metric_labels import STRATEGIES, bounded, stage_label
from app.observability.metrics import QUERY_STAGE_DURATION_SECONDS, MetricsSwitch
from app.observability.spans import SPAN_ATTRIBUTE_ENGINE_ERROR

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

    from opentelemetry.sdk.trace import SpanProcessor
    from opentelemetry.util.types import AttributeValue

    from app.config import Settings


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
    `TRACING_ENABLED=false` no spans are opened at all. The caller owns the provider and calls
    `shutdown()` on it at exit, which flushes pending spans. The global provider is set only once per
    process (OpenTelemetry refuses to replace it): `phase()` and the HTTP server spans
    (`app/api/request_tracing.py`) open theirs from `current_tracer()`, this call's provider.
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
            if stage is not None and MetricsSwitch.enabled:
                QUERY_STAGE_DURATION_SECONDS.labels(
                    stage=stage_label(stage), strategy=bounded(strategy, STRATEGIES), arm=bounded(arm, ARMS)
                ).observe(time.perf_counter() - started)


def current_tracer() -> trace.Tracer:
    """The tracer of the process's configuration (a no-op one with `TRACING_ENABLED=false`)."""
    return _TracerHolder.tracer


def mark_span_failed(span: trace.Span, reason: str) -> None:
    """Mark `span` as failed with `reason` (a degraded reason such as `lexical_timeout`) without an exception."""
    if span.is_recording():
        span.set_attribute(SPAN_ATTRIBUTE_ENGINE_ERROR, reason)
        span.set_status(trace.StatusCode.ERROR, reason)
