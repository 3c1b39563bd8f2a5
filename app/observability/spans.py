"""Span names and span attribute keys of the search path: one spelling for traces, tests and dashboards."""

from __future__ import annotations

from typing import Final

SPAN_ATTRIBUTE_STRATEGY: Final = "search.strategy"
SPAN_ATTRIBUTE_ARM: Final = "search.arm"
SPAN_ATTRIBUTE_OUTCOME: Final = "search.outcome"
SPAN_ATTRIBUTE_RESULT_COUNT: Final = "search.result_count"
SPAN_ATTRIBUTE_DEGRADED_REASONS: Final = "search.degraded_reasons"
SPAN_ATTRIBUTE_CACHED: Final = "search.cached"
SPAN_ATTRIBUTE_ENGINE_ERROR: Final = "search.engine_error"
SPAN_REQUEST: Final = "search.request"
SPAN_OPTIMIZE: Final = "search.optimize"
