"""Every Prometheus metric object and the functions that record into them (but `refused_requests.py`'s one).

Metric names are a contract with the Grafana dashboard (`dashboards/`): change one only together with it.
All metrics live in prometheus-client's default registry. Label values come from the bounded sets
of `app.observability.metric_labels`; anything else is recorded as `"other"`, so no caller input can grow
the number of series.
"""

from __future__ import annotations

import hashlib
import itertools
from contextvars import ContextVar
from typing import TYPE_CHECKING, Final

from opentelemetry import trace
from prometheus_client import Counter, Gauge, Histogram, disable_created_metrics

from app.domain.labels import ARMS, HYBRID_ARM, NO_ARM, SEMANTIC_ARM
from app.observability.metric_labels import (
    CACHE_RESULTS,
    ENGINE_ERROR_ARMS,
    ENGINES,
    FALLBACK_REASONS,
    FLAG_KEYS,
    FLAG_REASONS,
    INGEST_STATUSES,
    MAX_VARIANT_LABEL_CHARS,
    OUTCOMES,
    ROLLOUT_DECIDERS,
    STRATEGIES,
    bounded,
    fallback_reason,
    stage_label,
)
from app.observability.spans import (
    SPAN_ATTRIBUTE_ARM,
    SPAN_ATTRIBUTE_DEGRADED_REASONS,
    SPAN_ATTRIBUTE_OUTCOME,
    SPAN_ATTRIBUTE_RESULT_COUNT,
    SPAN_ATTRIBUTE_STRATEGY,
)

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from app.knobs import SearchKnobs

current_arm: ContextVar[str] = ContextVar("poimen_search_arm", default=NO_ARM)
"""The rollout arm of the search this task serves; set by `SearchService`, read by engine error counts."""

_STAGE_BUCKETS_S: Final = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
HTTP_DURATION_BUCKETS_S: Final = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
)  # fmt: skip
"""Buckets of `poimen_http_request_duration_seconds` (Litestar's middleware): searches take milliseconds, a
write embeds its chunks before it answers (about 45 s per MB on 2 cores); prometheus-client's default
buckets stop at 10 s, past which every write was one `+Inf` bucket."""
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
    "Searches answered without one of their legs, by reason and rollout arm.",
    ["reason", "arm"],
)
ENGINE_ERRORS_TOTAL: Final = Counter(
    "poimen_engine_errors_total",
    "Calls to an engine that failed, by engine and rollout arm (none: work that serves no search, such as a write"
    " PostgreSQL refused or the outbox).",
    ["engine", "arm"],
)
REQUESTS_SHED_TOTAL: Final = Counter(
    "poimen_requests_shed_total",
    "Requests refused before any work: overload (503, too many in flight), rate_limit (429, per caller),"
    " refused_auth (429, refused authentications per client address) or caller_in_flight (429, one caller's"
    " share of the requests in flight).",
    ["reason"],
)
SHED_REASONS: Final = frozenset({"overload", "rate_limit", "refused_auth", "caller_in_flight"})
CONNECTIONS_CLOSED_TOTAL: Final = Counter(
    "poimen_connections_closed_total",
    "Connections closed at the open-connection cap: idle (the idlest one, for a new one) or full (the new one).",
    ["reason"],
)
SHADOW_SEARCH_DURATION_SECONDS: Final = Histogram(
    "poimen_shadow_search_duration_seconds",
    "Seconds a shadow search took, by the arm it ran (off the response path; shadow mode only).",
    ["arm"],
    buckets=_STAGE_BUCKETS_S,
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
LEXICAL_OUTBOX_OLDEST_AGE_SECONDS: Final = Gauge(
    "poimen_lexical_outbox_oldest_age_seconds",
    "Seconds the oldest pending outbox entry has waited: how far the lexical leg lags PostgreSQL.",
)
QUERY_RESULTS: Final = Histogram(
    "poimen_query_results",
    "Number of hits a search returned.",
    ["strategy"],
    buckets=_RESULT_COUNT_BUCKETS,
)
FLAGS_RELOAD_ERRORS_TOTAL: Final = Counter(
    "poimen_flags_reload_errors_total",
    "Flag definitions rejected (flags file or flagd file: parse error, unknown key, invalid value) or a flag"
    " provider failing or unreachable; the last good flags stay in force.",
)
JWT_KEY_FILE_RELOAD_ERRORS_TOTAL: Final = Counter(
    "poimen_jwt_key_file_reload_errors_total",
    "New contents of the JWT key file refused (unreadable, half written, no usable key); the keys before stay.",
)
FLAGS_VERSION: Final = Gauge(
    "poimen_flags_version",
    "Version of the flags in force; increases by one on every successful change this process applied.",
)
FLAGS_FINGERPRINT: Final = Gauge(
    "poimen_flags_fingerprint",
    "The flags in force, hashed to 48 bits: equal on every pod that applied the same values, whatever its"
    " version count (a pod started since counts from 1).",
)
ROLLOUT_HYBRID_PERCENT: Final = Gauge(
    "poimen_rollout_hybrid_percent",
    "Effective HYBRID_ROLLOUT_PERCENT: the share of callers (0-100) sent to the hybrid arm.",
)
ROLLOUT_ASSIGNMENTS_TOTAL: Final = Counter(
    "poimen_rollout_assignments_total",
    "Requests assigned to a rollout arm, by arm and what decided it (flags: the flag system's split; service).",
    ["arm", "decided_by"],
)
FLAG_EVALUATIONS_TOTAL: Final = Counter(
    "poimen_flag_evaluations_total",
    "OpenFeature flag evaluations, by flag key, variant (none without one) and resolution reason.",
    ["flag", "variant", "reason"],
)
SHADOW_OVERLAP_AT_10: Final = Histogram(
    "poimen_shadow_overlap_at_10",
    "Overlap@10 (0..1) between the served arm's hits and the shadow arm's hits.",
    buckets=_OVERLAP_BUCKETS,
)


class MetricsSwitch:
    """Whether the `record_*` helpers and `phase(stage=...)` touch the metric objects at all."""

    enabled: bool = True


def configure_metrics(*, enabled: bool) -> None:
    """Turn recording on or off for this process (`METRICS_ENABLED`).

    Off, every `record_*` helper and `phase(stage=...)` returns without touching a metric object, so
    a service with metrics disabled pays nothing for them; `/metrics` then only shows zeros.
    Either way `/metrics` carries no `<name>_created` samples: in the text format Prometheus stores each as
    one more series per label set of every counter and histogram (a quarter of the page), and no panel
    or alert reads them.
    """
    MetricsSwitch.enabled = enabled
    disable_created_metrics()  # type: ignore[no-untyped-call] # prometheus-client leaves it unannotated


def metrics_enabled() -> bool:
    """Whether metrics are recorded in this process (see `configure_metrics`)."""
    return MetricsSwitch.enabled


def _initialise_label_sets() -> None:
    # Counters with known label sets start at 0, so rate() and the dashboard see them before the first event.
    for strategy, arm, outcome in itertools.product(STRATEGIES, ARMS, OUTCOMES):
        QUERIES_TOTAL.labels(strategy=strategy, arm=arm, outcome=outcome)
    for result in CACHE_RESULTS:
        QUERY_CACHE_REQUESTS_TOTAL.labels(result=result)
    for reason, arm in itertools.product(FALLBACK_REASONS, ARMS):
        FALLBACKS_TOTAL.labels(reason=reason, arm=arm)
    for engine, arm in itertools.product(ENGINES, ENGINE_ERROR_ARMS):
        ENGINE_ERRORS_TOTAL.labels(engine=engine, arm=arm)
    for reason in SHED_REASONS:
        REQUESTS_SHED_TOTAL.labels(reason=reason)
    for status in INGEST_STATUSES:
        INGESTED_DOCUMENTS_TOTAL.labels(status=status)
    for arm, decided_by in itertools.product((HYBRID_ARM, SEMANTIC_ARM), ROLLOUT_DECIDERS):
        ROLLOUT_ASSIGNMENTS_TOTAL.labels(arm=arm, decided_by=decided_by)
    for arm in (HYBRID_ARM, SEMANTIC_ARM):
        SHADOW_SEARCH_DURATION_SECONDS.labels(arm=arm)


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
    if MetricsSwitch.enabled:
        strategy_value = bounded(strategy, STRATEGIES)
        arm_value = bounded(arm, ARMS)
        for stage, elapsed_ms in stage_ms.items():
            if elapsed_ms >= 0:
                QUERY_STAGE_DURATION_SECONDS.labels(
                    stage=stage_label(stage), strategy=strategy_value, arm=arm_value
                ).observe(elapsed_ms / 1000.0)
        QUERIES_TOTAL.labels(strategy=strategy_value, arm=arm_value, outcome=bounded(outcome, OUTCOMES)).inc()
        for reason in degraded_reasons:
            FALLBACKS_TOTAL.labels(reason=fallback_reason(reason), arm=arm_value).inc()
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
    if not MetricsSwitch.enabled:
        return
    QUERY_CACHE_REQUESTS_TOTAL.labels(result="hit" if hit else "miss").inc()


def record_engine_error(engine: str) -> None:
    """Count one failed engine call; `engine` is the adapter's `name`, the arm that of the search running it."""
    if not MetricsSwitch.enabled:
        return
    ENGINE_ERRORS_TOTAL.labels(engine=bounded(engine, ENGINES), arm=bounded(current_arm.get(), ENGINE_ERROR_ARMS)).inc()


def record_shed(reason: str) -> None:
    """Count one request refused for `reason` (`overload`, `rate_limit`, `refused_auth` or `caller_in_flight`)."""
    if not MetricsSwitch.enabled:
        return
    REQUESTS_SHED_TOTAL.labels(reason=bounded(reason, SHED_REASONS)).inc()


def record_connection_closed(reason: str) -> None:
    """Count one connection closed at the open-connection cap (`idle` or `full`)."""
    if MetricsSwitch.enabled:
        CONNECTIONS_CLOSED_TOTAL.labels(reason=bounded(reason, frozenset({"idle", "full"}))).inc()


def record_shadow_search(arm: str, elapsed_s: float) -> None:
    """Observe how long a shadow search of `arm` took."""
    if not MetricsSwitch.enabled:
        return
    SHADOW_SEARCH_DURATION_SECONDS.labels(arm=bounded(arm, ARMS)).observe(max(elapsed_s, 0.0))


def record_ingested(*, status: str, documents: int = 1, chunks: int = 0) -> None:
    """Count `documents` ingested documents with `status` and the `chunks` they stored."""
    if not MetricsSwitch.enabled:
        return
    INGESTED_DOCUMENTS_TOTAL.labels(status=bounded(status, INGEST_STATUSES)).inc(documents)
    if chunks > 0:
        INGESTED_CHUNKS_TOTAL.inc(chunks)


def record_rollout_assignment(arm: str, *, decided_by: str = "service") -> None:
    """Count one request assigned to a rollout arm (`hybrid` or `semantic`) by `flags` or the `service`."""
    if not MetricsSwitch.enabled:
        return
    ROLLOUT_ASSIGNMENTS_TOTAL.labels(arm=bounded(arm, ARMS), decided_by=bounded(decided_by, ROLLOUT_DECIDERS)).inc()


def record_flag_evaluation(flag: str, *, variant: str | None, reason: str | None) -> None:
    """Count one flag evaluation; unknown flags and reasons are `other`, a missing variant `none`."""
    if not MetricsSwitch.enabled:
        return
    variant_label = "none" if not variant else variant.strip()[:MAX_VARIANT_LABEL_CHARS]
    FLAG_EVALUATIONS_TOTAL.labels(
        flag=bounded(flag, FLAG_KEYS), variant=variant_label, reason=bounded(reason or "unknown", FLAG_REASONS)
    ).inc()


def record_shadow_overlap(overlap: float) -> None:
    """Observe overlap@10 between the served and the shadow arm, clamped to 0..1."""
    if not MetricsSwitch.enabled:
        return
    SHADOW_OVERLAP_AT_10.observe(min(max(overlap, 0.0), 1.0))


def publish_flags(*, version: int, knobs: SearchKnobs) -> None:
    """Publish the flags in force: this process's version count, their fingerprint, the hybrid share."""
    FLAGS_VERSION.set(version)
    FLAGS_FINGERPRINT.set(flags_fingerprint(knobs))
    ROLLOUT_HYBRID_PERCENT.set(knobs.hybrid_rollout_percent)


def flags_fingerprint(knobs: SearchKnobs) -> int:
    """The knobs' values hashed to 48 bits (exact in a float gauge), the same in every process holding them."""
    return int(hashlib.sha256(knobs.model_dump_json().encode()).hexdigest()[:12], 16)
