"""Serving a search from the query cache: the cached answer with this request's own times, counted as answered."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING

from opentelemetry import trace

from app.domain.labels import STAGE_OPTIMIZE, STAGE_TOTAL
from app.observability.metrics import record_search
from app.observability.spans import SPAN_ATTRIBUTE_CACHED

if TYPE_CHECKING:
    from app.domain.models import QueryAnalysis
    from app.search.calls import SearchOutcome


def cached_outcome(
    cached: SearchOutcome, *, analysis: QueryAnalysis, arm: str, optimize_ms: float, started: float
) -> SearchOutcome:
    """`cached` as this request's answer (`cached`, its total time, its own `analysis`), recorded as answered.

    The key holds the plan, not the query's letters: `Falcon` and `falcon` may share an answer, but each
    request's explain output reads its own query (the names it found by their capitals, say).

    A hit is still an answered query: counted with only the stages it ran (optimize, total), and marked on
    the request's span. `started` is the request's `time.perf_counter()` at its start.
    """
    total_ms = (time.perf_counter() - started) * 1000
    record_search(
        strategy=cached.plan.strategy.value,
        arm=arm,
        outcome="ok",
        stage_ms={STAGE_OPTIMIZE: optimize_ms, STAGE_TOTAL: total_ms},
        result_count=len(cached.result.hits),
    )
    span = trace.get_current_span()
    if span.is_recording():
        span.set_attribute(SPAN_ATTRIBUTE_CACHED, True)  # noqa: FBT003 - OTel's attribute API is positional
    return replace(cached, cached=True, total_ms=total_ms, optimize_ms=optimize_ms, analysis=analysis)
