"""Planner: merges a request's options with the optimizer's reading into the `SearchPlan` the searcher runs.

Precedence, highest first: what the request says explicitly, the optimizer's routing (only when routing
is enabled), the knobs (`app/knobs.py`: env, overlaid by the flags file). Request validation is
`app.query.validation`'s, which `build_plan` calls: it raises `InvalidQueryError` naming the offending field.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Final

from app.domain.models import (
    LEXICAL_LEG,
    SEMANTIC_LEG,
    Filters,
    FusionMethod,
    FusionSettings,
    SearchPlan,
    SearchStrategy,
)
from app.domain.moments import as_utc
from app.domain.reordering import EvidencePreferences, NeighbourSharing
from app.query.intent import without_names
from app.query.validation import fusion_options_given, validate_options, validate_query_text

if TYPE_CHECKING:
    from collections.abc import Collection, Sequence
    from datetime import datetime

    from app.domain.models import QueryAnalysis
    from app.knobs import SearchKnobs

EXPLICIT_CONFIDENCE: Final = 1.0
"""Confidence reported when the strategy was chosen, not inferred: by the request or by configuration."""


@dataclass(frozen=True, slots=True)
class SearchOptions:
    """What one search request asks for. `None` means "not given: use the plan defaults".

    Dates are an event-time range `[date_from, date_to)`; naive datetimes are taken as UTC.
    `semantic_weight`/`lexical_weight` are fusion weights; giving one sets the other to its complement.
    `collapse=True` keeps at most `max_chunks_per_document` (or the default, or 1) chunks per document;
    `collapse=False` turns collapsing off.
    """

    project: str
    limit: int | None = None
    strategy: SearchStrategy | None = None
    fusion_method: FusionMethod | None = None
    semantic_weight: float | None = None
    lexical_weight: float | None = None
    rrf_k: int | None = None
    retrieve_k: int | None = None
    levels: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    source_prefix: str | None = None
    date_from: datetime | None = None
    date_to: datetime | None = None
    collapse: bool | None = None
    max_chunks_per_document: int | None = None
    min_score: float | None = None
    fuzzy: bool | None = None


def build_plan(
    analysis: QueryAnalysis, options: SearchOptions, knobs: SearchKnobs, *, common_names: Collection[str] = ()
) -> SearchPlan:
    """Build the plan for one query. Raises `InvalidQueryError` (with `field`) for invalid options.

    Precedence: what the request says, then the knobs. Strategy: the request's, else the optimizer's
    when `query_optimization_enabled` and it is one of `routable_strategies`, else `search_strategy`.
    Filters: the request's; plus, when entity filters are enabled, the query's `#tags` (a chunk must
    carry all of them) and the query's dates intersected with the request's date range. Query dates
    that do not overlap the request's range are dropped: the explicit range wins. Both legs get the
    same filters. The semantic text is the query's without its names that are in `common_names` (the
    project's speakers, `app/search/common_names.py`); the lexical query keeps them.
    """
    validate_query_text(analysis.raw_query, max_chars=knobs.query_max_chars)
    validate_options(options)
    limit = knobs.rrf_final_k if options.limit is None else options.limit
    strategy, confidence = _choose_strategy(analysis, options, knobs)
    if strategy is not SearchStrategy.HYBRID:
        # Routing chose a strategy that fuses nothing (an explicit one refused the options): they stay unused,
        # down to the readable final_score, whose legs a cascading search would otherwise weigh by them.
        options = without_fusion_options(options)
    method = options.fusion_method or knobs.ranking_algorithm
    if method is not FusionMethod.RRF:
        # Only the knobs' fusion can get here without RRF beside an `rrf_k` (one asked for refuses it): a flag may
        # change RANKING_ALGORITHM per request, so the option is unused (`unused_options`), not an error.
        options = replace(options, rrf_k=None)
    semantic_retrieve_k, lexical_retrieve_k = knobs.retrieve_k()
    if options.retrieve_k:
        semantic_retrieve_k = lexical_retrieve_k = options.retrieve_k
    lexical_query = analysis.lexical_query
    fuzzy = knobs.lexical_fuzziness if options.fuzzy is None else options.fuzzy
    if lexical_query.fuzzy != fuzzy:
        lexical_query = replace(lexical_query, fuzzy=fuzzy)
    shared_names = [name for name in analysis.names if name in common_names]
    return SearchPlan(
        semantic_text=without_names(analysis.search_text, shared_names) if shared_names else analysis.search_text,
        lexical_query=lexical_query,
        filters=_filters(analysis, options, entity_filters_enabled=knobs.query_entity_extraction),
        strategy=strategy,
        strategy_confidence=confidence,
        fusion=FusionSettings(
            method=method,
            rrf_k=knobs.rrf_k_constant if options.rrf_k is None else options.rrf_k,
            weights=_weights(options, knobs, method),
        ),
        # A leg must be able to fill the page on its own.
        semantic_retrieve_k=max(semantic_retrieve_k, limit),
        lexical_retrieve_k=max(lexical_retrieve_k, limit),
        limit=limit,
        cascading_multiplier=knobs.cascading_lexical_multiplier,
        max_chunks_per_document=_max_chunks_per_document(options, knobs.max_chunks_per_document or None),
        min_score=options.min_score,
        lexical_timeout_s=knobs.lexical_timeout_ms / 1000,
        semantic_timeout_s=knobs.semantic_timeout_ms / 1000,
        # The boosts are tuned on the z-score scale of hybrid fusion; other scores (cosine, BM25, RRF sums) keep theirs.
        evidence=evidence_preferences(analysis, knobs, speakers=shared_names)
        if strategy is SearchStrategy.HYBRID and method is FusionMethod.ZSCORE
        else EvidencePreferences(),
        session_cap=knobs.session_diversity_cap or None,
        # Shares are of z-scores (tuned there), like the boosts above.
        neighbours=NeighbourSharing(share=knobs.neighbour_score_share, window_turns=knobs.neighbour_window_turns)
        if strategy is SearchStrategy.HYBRID and method is FusionMethod.ZSCORE
        else NeighbourSharing(),
    )


def evidence_preferences(
    analysis: QueryAnalysis, knobs: SearchKnobs, *, speakers: Sequence[str] = ()
) -> EvidencePreferences:
    """The evidence boosts for one query: only those its reading asks for, at the knobs' strengths.

    The names the boosts read are the query's names that are the project's `speakers` (its common title
    names, `SEMANTIC_COMMON_NAME_SHARE`): a capitalised word that no title widely carries (a gene, an
    acronym) boosts nothing. With the mention boost on, or common names off, every name of the query counts.
    """
    every_name = knobs.evidence_mention_boost > 0 or knobs.semantic_common_name_share <= 0
    names = analysis.names if every_name else tuple(speakers)
    return EvidencePreferences(
        names=names if knobs.evidence_speaker_boost > 0 or knobs.evidence_mention_boost > 0 else (),
        entity_boost=knobs.evidence_speaker_boost,
        mention_boost=knobs.evidence_mention_boost,
        prefer_dated=analysis.asks_when and knobs.evidence_date_boost > 0,
        date_boost=knobs.evidence_date_boost,
        prefer_recent=analysis.asks_latest and knobs.evidence_recency_boost > 0,
        recency_boost=knobs.evidence_recency_boost,
    )


def without_fusion_options(options: SearchOptions) -> SearchOptions:
    """`options` less its fusion options: what a search that fuses nothing reads of them."""
    return replace(options, fusion_method=None, semantic_weight=None, lexical_weight=None, rrf_k=None)


def unused_options(options: SearchOptions, plan: SearchPlan) -> tuple[str, ...]:
    """The options the request gave that `plan` does not use (the `SearchOptions` names).

    Its fusion options, when routing (or the rollout's semantic arm) chose a strategy that fuses nothing;
    `rrf_k` when the knobs' fusion (`RANKING_ALGORITHM`) is not RRF. A strategy or fusion the request names
    that cannot use them refuses them instead (`app.query.validation.validate_options`).
    """
    if plan.strategy is not SearchStrategy.HYBRID:
        return fusion_options_given(options)
    return ("rrf_k",) if options.rrf_k is not None and plan.fusion.method is not FusionMethod.RRF else ()


def _choose_strategy(
    analysis: QueryAnalysis, options: SearchOptions, knobs: SearchKnobs
) -> tuple[SearchStrategy, float]:
    if options.strategy is not None:
        return options.strategy, EXPLICIT_CONFIDENCE
    if knobs.query_optimization_enabled and analysis.strategy in knobs.routable_strategies:
        return analysis.strategy, analysis.confidence
    return knobs.search_strategy, EXPLICIT_CONFIDENCE


def _weights(options: SearchOptions, knobs: SearchKnobs, method: FusionMethod) -> dict[str, float]:
    """Per-leg weights. Plain RRF (the reference's `1/(k+rank)` per list) is unweighted unless asked.

    A request giving one weight gets the complement for the other; giving none, the knobs' weights.
    """
    semantic, lexical = options.semantic_weight, options.lexical_weight
    if semantic is None and lexical is None:
        if method is FusionMethod.RRF:
            return {}
        semantic, lexical = knobs.leg_weights()
    if semantic is None:
        semantic = max(0.0, 1.0 - lexical) if lexical is not None else knobs.leg_weights()[0]
    if lexical is None:
        lexical = max(0.0, 1.0 - semantic)
    return {SEMANTIC_LEG: semantic, LEXICAL_LEG: lexical}


def _filters(analysis: QueryAnalysis, options: SearchOptions, *, entity_filters_enabled: bool) -> Filters:
    tags = options.tags
    event_time_from, event_time_to = as_utc(options.date_from), as_utc(options.date_to)
    asked_for_dates = event_time_from is not None or event_time_to is not None
    if entity_filters_enabled:
        tags = tuple(dict.fromkeys([*options.tags, *analysis.entities.tags]))
        query_from, query_to = analysis.event_time_from, analysis.event_time_to
        start = _latest(event_time_from, query_from)
        end = _earliest(event_time_to, query_to)
        # Only a range that misses the request's own gives way to it. The query's alone is kept even when
        # empty: one wholly before year 1 ("last month" at an `as_of` in January of year 1) is clamped to
        # [0001-01-01, 0001-01-01), and dropping it as empty searched every date instead of none.
        if not asked_for_dates or start is None or end is None or start < end:
            event_time_from, event_time_to = start, end
    # A range read only from the query's words narrows dated chunks but keeps undated ones: "mortality from
    # 2009 to 2014" should not empty a corpus without event times. A range the caller asked for is strict.
    include_undated = not asked_for_dates and (event_time_from is not None or event_time_to is not None)
    return Filters(
        project_id=options.project,
        levels=options.levels,
        tags=tags,
        source_prefix=options.source_prefix,
        event_time_from=event_time_from,
        event_time_to=event_time_to,
        include_undated=include_undated,
        # The lexical query excludes them too; here every leg does, so no hybrid hit holds an excluded word.
        excluded_terms=analysis.lexical_query.excluded_terms,
    )


def _max_chunks_per_document(options: SearchOptions, configured: int | None) -> int | None:
    if options.collapse is False:
        return None
    if options.collapse is True:
        return options.max_chunks_per_document or configured or 1
    return options.max_chunks_per_document or configured


def _latest(first: datetime | None, second: datetime | None) -> datetime | None:
    if first is None or second is None:
        return first or second
    return max(first, second)


def _earliest(first: datetime | None, second: datetime | None) -> datetime | None:
    if first is None or second is None:
        return first or second
    return min(first, second)
