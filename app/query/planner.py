"""Planner: merges a request's options with the optimizer's reading into the `SearchPlan` the searcher runs.

Precedence, highest first: what the request says explicitly, the optimizer's routing (only when routing
is enabled), the knobs (`app/knobs.py`: env, overlaid by the flags file). Request validation lives here
too and raises `InvalidQueryError` naming the offending field.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Final, NoReturn

from app.domain.errors import InvalidQueryError
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
from app.knobs import QUERY_MAX_CHARS_CEILING
from app.query.intent import without_names

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping, Sequence
    from datetime import datetime

    from app.domain.models import QueryAnalysis
    from app.knobs import SearchKnobs

MAX_QUERY_CHARS: Final = QUERY_MAX_CHARS_CEILING
"""No query is longer than this whatever `QUERY_MAX_CHARS` says (the setting's own upper bound)."""
MIN_LIMIT: Final = 1
MAX_LIMIT: Final = 100
MAX_RETRIEVE_K: Final = 1000
EXPLICIT_CONFIDENCE: Final = 1.0
"""Confidence reported when the strategy was chosen, not inferred: by the request or by configuration."""
REQUEST_NAMES: Final[Mapping[str, str]] = {
    "semantic_weight": "weights.semantic",
    "lexical_weight": "weights.lexical",
    "fusion_method": "fusion",
    "max_chunks_per_document": "collapse",
    "levels": "filters.level",
    "tags": "filters.tags",
    "source_prefix": "filters.source_prefix",
    "date_from": "filters.date_from",
    "date_to": "filters.date_to",
}
"""How a search request spells the options (`POST /v1/search`) whose `SearchOptions` names differ: a refusal's
`field` and words name what the caller sent. The query string and the CLI flags spell those they take alike."""


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


def validate_query_text(raw_query: str, *, max_chars: int = MAX_QUERY_CHARS) -> None:
    """Raise `InvalidQueryError(field="query")` for an empty, blank or over-long query.

    `max_chars` is the `QUERY_MAX_CHARS` knob where one is at hand; the ceiling otherwise.

    Cheap: call it before `QueryOptimizer.analyze` so oversized input is never analysed.
    """
    if not raw_query or not raw_query.strip():
        msg = "query must not be empty"
        raise InvalidQueryError(msg, field="query")
    if len(raw_query) > max_chars:
        msg = f"query is {len(raw_query)} characters; at most {max_chars} are allowed"
        raise InvalidQueryError(msg, field="query")


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


def validate_options(options: SearchOptions) -> None:
    """Raise `InvalidQueryError` (with `field`) for options no plan can be built from; `build_plan` calls it too.

    Only what the request says decides: never a knob, which a flag may set differently per request. The field
    and the words name each option as the request spells it (`REQUEST_NAMES`: `weights.semantic`, `collapse`).
    """

    def fail(message: str, field: str) -> NoReturn:
        raise InvalidQueryError(message, field=field)

    if not options.project.strip():
        fail("project must not be empty", "project")
    if options.limit is not None and not MIN_LIMIT <= options.limit <= MAX_LIMIT:
        fail(f"limit must be between {MIN_LIMIT} and {MAX_LIMIT}; got {options.limit}", "limit")
    if options.retrieve_k is not None and not 1 <= options.retrieve_k <= MAX_RETRIEVE_K:
        fail(f"retrieve_k must be between 1 and {MAX_RETRIEVE_K}; got {options.retrieve_k}", "retrieve_k")
    if options.rrf_k is not None and options.rrf_k < 1:
        fail(f"rrf_k must be at least 1; got {options.rrf_k}", "rrf_k")
    _validate_weights(options)
    _validate_fusion_options(options)
    if options.min_score is not None and not 0.0 <= options.min_score <= 1.0:  # NaN fails both
        # The relevance it thresholds lies in [0, 1]: above 1 nothing could pass, below 0 everything does.
        fail(f"min_score must be from 0 to 1 (the relevance final_score reads); got {options.min_score}", "min_score")
    if options.max_chunks_per_document is not None and options.max_chunks_per_document < 1:
        collapse = REQUEST_NAMES["max_chunks_per_document"]
        fail(f"{collapse} must be at least 1; got {options.max_chunks_per_document}", collapse)
    _validate_filters(options)


FUSION_OPTIONS: Final = ("fusion_method", "semantic_weight", "lexical_weight", "rrf_k")
"""The options only fusion reads: a strategy other than hybrid never uses them."""
_FUSES_NOTHING: Final = {
    SearchStrategy.LEXICAL: "ranks by the lexical leg's own BM25 score",
    SearchStrategy.SEMANTIC: "ranks by the semantic leg's own cosine similarity",
    SearchStrategy.CASCADING: "ranks the lexical leg's candidates by cosine similarity",
}


def fusion_options_given(options: SearchOptions) -> tuple[str, ...]:
    """The names of the fusion options (`FUSION_OPTIONS`) the request gave, in that order."""
    return tuple(name for name in FUSION_OPTIONS if getattr(options, name) is not None)


def without_fusion_options(options: SearchOptions) -> SearchOptions:
    """`options` less its fusion options: what a search that fuses nothing reads of them."""
    return replace(options, fusion_method=None, semantic_weight=None, lexical_weight=None, rrf_k=None)


def unused_options(options: SearchOptions, plan: SearchPlan) -> tuple[str, ...]:
    """The options the request gave that `plan` does not use (the `SearchOptions` names).

    Its fusion options, when routing (or the rollout's semantic arm) chose a strategy that fuses nothing;
    `rrf_k` when the knobs' fusion (`RANKING_ALGORITHM`) is not RRF. A strategy or fusion the request names
    that cannot use them refuses them instead (`validate_options`).
    """
    if plan.strategy is not SearchStrategy.HYBRID:
        return fusion_options_given(options)
    return ("rrf_k",) if options.rrf_k is not None and plan.fusion.method is not FusionMethod.RRF else ()


def _validate_fusion_options(options: SearchOptions) -> None:
    """`validate_options` for options that would be accepted and ignored: fusion options without fusion.

    A strategy asked for that fuses nothing never reads them, and `rrf_k` is read by RRF only. What the
    request does not decide, routing's strategy and the knobs' fusion, is not refused here: `unused_options`
    names what they leave unused.
    """
    given = fusion_options_given(options)
    if given and options.strategy is not None and options.strategy is not SearchStrategy.HYBRID:
        msg = (
            "fusion options (fusion, weights, rrf_k) apply to strategy hybrid only: "
            f"strategy {options.strategy.value} {_FUSES_NOTHING[options.strategy]} and fuses nothing"
        )
        raise InvalidQueryError(msg, field=REQUEST_NAMES.get(given[0], given[0]))
    method = options.fusion_method
    if options.rrf_k is not None and method is not None and method is not FusionMethod.RRF:
        msg = f'rrf_k applies to fusion rrf only: this search asks for fusion {method.value}; send "fusion": "rrf"'
        raise InvalidQueryError(msg, field="rrf_k")


def _validate_filters(options: SearchOptions) -> None:
    """`validate_options` for the filters: a range that is not one, a value that can match nothing."""
    date_from, date_to = as_utc(options.date_from), as_utc(options.date_to)
    if date_from is not None and date_to is not None and date_from >= date_to:
        start, end = REQUEST_NAMES["date_from"], REQUEST_NAMES["date_to"]
        msg = f"{start} must be before {end}; got {date_from.isoformat()} and {date_to.isoformat()} (naive: UTC)"
        raise InvalidQueryError(msg, field=start)
    # No stored chunk holds a NUL (ingestion refuses it) and PostgreSQL refuses one in a parameter: a 400,
    # not a failed leg counted as an engine error.
    for option, values in (
        ("levels", options.levels),
        ("tags", options.tags),
        ("source_prefix", (options.source_prefix,)),
    ):
        for index, value in enumerate(values):
            if value is not None and "\x00" in value:
                field = REQUEST_NAMES[option] + (f"[{index}]" if option != "source_prefix" else "")
                msg = f"{field} must not contain a NUL character"
                raise InvalidQueryError(msg, field=field)
    for index, tag in enumerate(options.tags):
        if not tag.strip():
            # A stored tag is never blank (ingestion refuses one), so such a filter could only match nothing.
            field = f"{REQUEST_NAMES['tags']}[{index}]"
            msg = f"{field} is blank (only white space, {tag!r}): no document carries such a tag"
            raise InvalidQueryError(msg, field=field)


def _choose_strategy(
    analysis: QueryAnalysis, options: SearchOptions, knobs: SearchKnobs
) -> tuple[SearchStrategy, float]:
    if options.strategy is not None:
        return options.strategy, EXPLICIT_CONFIDENCE
    if knobs.query_optimization_enabled and analysis.strategy in knobs.routable_strategies:
        return analysis.strategy, analysis.confidence
    return knobs.search_strategy, EXPLICIT_CONFIDENCE


def _validate_weights(options: SearchOptions) -> None:
    """`validate_options` for the weights: negative, both 0, or one alone above 1 (its complement < 0)."""
    semantic, lexical = REQUEST_NAMES["semantic_weight"], REQUEST_NAMES["lexical_weight"]
    given = {semantic: options.semantic_weight, lexical: options.lexical_weight}
    for field, weight in given.items():
        if weight is not None and (not math.isfinite(weight) or weight < 0):
            msg = f"{field} must be a finite number >= 0; got {weight}"
            raise InvalidQueryError(msg, field=field)
    if options.semantic_weight == 0 and options.lexical_weight == 0:
        msg = f"{semantic} and {lexical} must not both be 0: one leg must weigh something"
        raise InvalidQueryError(msg, field=semantic)
    alone = [(field, weight) for field, weight in given.items() if weight is not None]
    if len(alone) == 1 and alone[0][1] > 1:
        # Its complement would be negative: the other leg would silently weigh nothing.
        field, weight = alone[0]
        other = lexical if field == semantic else semantic
        msg = f"{field} given alone must be at most 1 ({other} gets 1 - it); got {weight}: give both for another ratio"
        raise InvalidQueryError(msg, field=field)


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
