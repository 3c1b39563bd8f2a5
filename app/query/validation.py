"""Request validation: refuses options no plan can be built from, naming the field as the request spells it.

Only what the request says decides, never a knob (a flag may set a knob differently per request). Each refusal
is an `InvalidQueryError` whose `field` is the request's spelling of the option (`REQUEST_NAMES`). The planner
(`app.query.planner`) calls `validate_query_text` and `validate_options` before it builds a plan.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Final, NoReturn

from app.domain.errors import InvalidQueryError
from app.domain.models import FusionMethod, SearchStrategy
from app.domain.moments import as_utc
from app.knobs import QUERY_MAX_CHARS_CEILING

if TYPE_CHECKING:
    from collections.abc import Mapping

    from app.query.planner import SearchOptions

MAX_QUERY_CHARS: Final = QUERY_MAX_CHARS_CEILING
"""No query is longer than this whatever `QUERY_MAX_CHARS` says (the setting's own upper bound)."""
MIN_LIMIT: Final = 1
MAX_LIMIT: Final = 100
MAX_RETRIEVE_K: Final = 1000
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
