"""Request shapes (msgspec Structs) of the search endpoints: the bodies of `POST /v1/search` and the batch.

Decoding validates them (types, bounds, unknown fields refused); `as_of_from_text` applies the body's
`as_of` rule to the GET endpoint's query string. Their times are kept to the microsecond, truncated
(each type's `time_paths`, `app.api.microsecond_times`). Responses are in `app.api.search_schemas`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, ClassVar, Final, Literal

import msgspec

from app.api.document_schemas import Tag
from app.api.microsecond_times import TimePaths
from app.api.strict_queries import request_time
from app.config import SEARCH_BATCH_MAX_QUERIES_CEILING
from app.domain.project_ids import PROJECT_ID_PATTERN, PROJECT_ID_RULE
from app.domain.tags import MAX_DOCUMENT_TAGS
from app.query.validation import MAX_QUERY_CHARS
from app.search.paging import PAGE_DEPTH

ProjectId = Annotated[str, msgspec.Meta(pattern=PROJECT_ID_PATTERN, description=PROJECT_ID_RULE)]
Level = Annotated[
    str,
    msgspec.Meta(
        pattern="^L[0-6]$",
        description="A chunk's depth below its document's title: L0 (text before any heading) to L6",
    ),
]
StrategyName = Literal["hybrid", "semantic", "lexical", "cascading"]
FusionName = Literal["rrf", "weighted", "zscore"]

FUSES_NOTHING_REFUSAL: Final = (
    "Fusion options shape the hybrid strategy's fusion only: beside `strategy` lexical, semantic or cascading a 400"
    " naming the option; when no strategy is asked for and routing picks one of those, unused and named in"
    " `query_analysis.unused_options`"
)
TRUNCATED_TIME_RULE: Final = "kept to the microsecond: digits past it are dropped, not rounded"
FUSION_DESCRIPTION: Final = (
    f"How the hybrid strategy fuses its legs (absent: RANKING_ALGORITHM). {FUSES_NOTHING_REFUSAL}"
)
WEIGHTS_DESCRIPTION: Final = f"The legs' shares of the hybrid fusion (absent: the service's). {FUSES_NOTHING_REFUSAL}"
RRF_K_DESCRIPTION: Final = (
    "RRF's constant k, 1-10000 (absent: RRF_K_CONSTANT): read by fusion rrf alone, so beside another `fusion`"
    " a 400; with no `fusion` while RANKING_ALGORITHM is not rrf, unused (`query_analysis.unused_options`)."
    f" {FUSES_NOTHING_REFUSAL}"
)

AsOf = Annotated[
    datetime,
    msgspec.Meta(
        tz=True,
        description=(
            '"Now" for relative dates in the query ("last week"): a memory\'s own clock; absent, the server\'s.'
            f" RFC 3339 with an offset or Z (2024-05-08T12:00:00Z), {TRUNCATED_TIME_RULE}"
        ),
    ),
]
"""`as_of` wherever a search is made (POST body, batch query, GET parameter): one type, one rule.

A time without an offset is refused rather than guessed: "last week" of a memory kept in Tokyo and of one
kept in UTC can be different weeks, and a caller who meant local time would get the wrong one silently.
"""


class SearchFilters(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Restrictions applied identically on both legs."""

    level: Level | Annotated[list[Level], msgspec.Meta(max_length=7)] | None = None
    # Every tag must be on a chunk, and a document carries at most MAX_DOCUMENT_TAGS: more match nothing.
    tags: Annotated[
        list[Tag],
        msgspec.Meta(max_length=MAX_DOCUMENT_TAGS, description="Chunks carrying every listed tag (case is ignored)"),
    ] = []
    source_prefix: Annotated[str, msgspec.Meta(max_length=1024)] | None = None
    date_from: (
        Annotated[
            datetime,
            msgspec.Meta(
                description=f"Chunks whose event time is at or after this (naive: UTC); {TRUNCATED_TIME_RULE}"
            ),
        ]
        | None
    ) = None
    date_to: (
        Annotated[
            datetime,
            msgspec.Meta(description=f"Chunks whose event time is before this (naive: UTC); {TRUNCATED_TIME_RULE}"),
        ]
        | None
    ) = None


Weight = Annotated[float, msgspec.Meta(ge=0.0, le=10.0)]


class FusionWeights(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Per-leg weights for fusion: one given alone (0-1), the other leg gets 1 - it; none, the defaults."""

    # Absent is not 1.0: `{"semantic": 0.45}` meant 0.45 / 0.55 and weighed the lexical leg 1.0 instead.
    semantic: Weight | None = None
    lexical: Weight | None = None


class SearchFields(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """One search's fields: the body of `POST /v1/search` less `project`, and one query of a batch.

    Paging: send `offset` (0 for the first page) or the `next_cursor` of the previous page; every page is
    cut from one ranking of the query, so pages never repeat a hit.
    """

    query: Annotated[
        str,
        msgspec.Meta(
            min_length=1,
            max_length=MAX_QUERY_CHARS,
            description=(
                "The query: at most QUERY_MAX_CHARS characters (a setting and flag: 8,000 by default, a 400 beyond;"
                f" {MAX_QUERY_CHARS:,} whatever it says); on GET /memory/query at most 4,000"
            ),
        ),
    ]
    limit: Annotated[int, msgspec.Meta(ge=1, le=100)] | None = None
    filters: SearchFilters | None = None
    strategy: StrategyName | None = None
    fusion: Annotated[FusionName | None, msgspec.Meta(description=FUSION_DESCRIPTION)] = None
    weights: Annotated[FusionWeights | None, msgspec.Meta(description=WEIGHTS_DESCRIPTION)] = None
    rrf_k: Annotated[
        Annotated[int, msgspec.Meta(ge=1, le=10000)] | None, msgspec.Meta(description=RRF_K_DESCRIPTION)
    ] = None
    collapse: Annotated[int, msgspec.Meta(ge=1, le=100)] | None = None
    min_score: Annotated[float, msgspec.Meta(ge=0, le=1)] | None = None  # the relevance final_score reads
    explain: bool = False
    offset: Annotated[int, msgspec.Meta(ge=0, lt=PAGE_DEPTH)] | None = None
    cursor: Annotated[str, msgspec.Meta(max_length=4096)] | None = None
    # "Now" for relative dates in the query ("last week"): a memory's own clock; absent, the server's.
    as_of: AsOf | None = None


class SearchRequest(SearchFields, kw_only=True, forbid_unknown_fields=True):
    """Body of `POST /v1/search`."""

    time_paths: ClassVar[TimePaths] = (("as_of",), ("filters", "date_from"), ("filters", "date_to"))
    project: ProjectId


class BatchSearchRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Body of `POST /v1/search/batch`: several searches of one project, answered in order."""

    time_paths: ClassVar[TimePaths] = tuple(("queries", "*", *path) for path in SearchRequest.time_paths)
    project: ProjectId
    # The setting (`SEARCH_BATCH_MAX_QUERIES`) is checked after decoding; the schema bounds the decoding itself.
    queries: Annotated[list[SearchFields], msgspec.Meta(min_length=1, max_length=SEARCH_BATCH_MAX_QUERIES_CEILING)]


def as_of_from_text(text: str) -> datetime:
    """`as_of` of a query string, validated and worded as a JSON body's `as_of`; a 400 naming `as_of` otherwise."""
    return request_time(text, field="as_of", time_type=AsOf)
