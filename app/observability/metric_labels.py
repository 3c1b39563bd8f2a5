"""Bounded label values of the metrics: the sets each label may take, and the mapping of anything else.

Contracts:
- A label's value is one of its set here, lower-cased, or `OTHER`: no caller input (a query, a header, an
  engine's message) can grow the number of series.
- Stage names and degraded reasons are folded onto the dashboard's names (`stage_label`, `fallback_reason`)
  before they are bounded, so an alias never counts as `OTHER`.
"""

from __future__ import annotations

from typing import Final

from app.domain.labels import ARMS, LEXICAL_UNCONFIRMED, NO_ARM, STAGES
from app.knobs import KNOB_NAMES

ENGINE_ERROR_ARMS: Final = ARMS | {NO_ARM}

OTHER: Final = "other"
"""The label value recorded for anything outside a label's bounded set."""

STRATEGIES: Final = frozenset({"hybrid", "semantic", "lexical", "cascading"})
OUTCOMES: Final = frozenset({"ok", "degraded", "error"})
CACHE_RESULTS: Final = frozenset({"hit", "miss"})
FALLBACK_REASONS: Final = frozenset(
    {
        "lexical_unavailable",
        "lexical_timeout",
        "semantic_unavailable",
        "semantic_timeout",
        "embedder_unavailable",
        "embedder_timeout",
        LEXICAL_UNCONFIRMED,
        "rerank_unavailable",
        "rerank_timeout",
    }
)
ENGINES: Final = frozenset({"pgvector", "postgres", "tantivy", "opensearch", "embedder"})
INGEST_STATUSES: Final = frozenset({"created", "updated", "unchanged", "deleted"})
ROLLOUT_DECIDERS: Final = frozenset({"flags", "service"})
FLAG_KEYS: Final = frozenset(name.replace("_", "-") for name in KNOB_NAMES)
# OpenFeature's resolution reasons (openfeature.flag_evaluation.Reason), lower-cased.
FLAG_REASONS: Final = frozenset(
    {"static", "default", "targeting_match", "split", "cached", "disabled", "unknown", "stale", "error"}
)
# Variant names come from the flag definitions (a bounded set an operator writes); longer ones are cut.
MAX_VARIANT_LABEL_CHARS: Final = 40

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
