"""What goes into and comes out of `SearchService`: a caller's search and its outcome."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from app.search.knob_source import FlagContext

if TYPE_CHECKING:
    from datetime import datetime

    from app.domain.models import QueryAnalysis, SearchPlan
    from app.domain.results import SearchResult
    from app.query.planner import SearchOptions
    from app.search.paging import SearchPage

ARM_BY_FLAGS: Final = "flags"
ARM_BY_SERVICE: Final = "service"
ARM_BY_REQUEST: Final = "request"


@dataclass(frozen=True, slots=True)
class SearchCall:
    """One caller's search: the query, its options, and who is asking.

    `auth_scope` names what the caller may see (cache entries are shared only within one scope);
    `caller_key` keeps a caller on one rollout arm and is the flags' targeting key; `scopes` are the
    caller's granted scopes, for flag targeting. `as_of` is "now" for relative dates in the query
    ("last week"); None means the service's clock. `page` asks for one page of a stable ranking.
    """

    query: str
    options: SearchOptions
    auth_scope: str
    caller_key: str
    as_of: datetime | None = None
    scopes: tuple[str, ...] = ()
    page: SearchPage | None = None

    @property
    def flag_context(self) -> FlagContext:
        """The evaluation context the flags are resolved with for this call."""
        return FlagContext(targeting_key=self.caller_key, project=self.options.project, scopes=self.scopes)


@dataclass(frozen=True, slots=True)
class SearchOutcome:
    """What one search produced: the optimizer's reading, the plan it ran, the result and how it was served.

    `arm` is the rollout arm (`control` when the request chose its strategy); `arm_decided_by` says what
    chose it: `flags` (the flag system's own split), `service` (bucketing by `hybrid_rollout_percent`)
    or `request`. `cached` is True when the result came from the query cache; `optimize_ms` and
    `total_ms` are then this request's own times.
    """

    analysis: QueryAnalysis
    plan: SearchPlan
    result: SearchResult
    arm: str
    cached: bool
    optimize_ms: float
    total_ms: float
    arm_decided_by: str = ARM_BY_SERVICE
    offset: int = 0
    next_offset: int | None = None
    generation: int | None = None
    """The project's generation the ranking was made at (None: not read, the cache is off)."""
    speakers: frozenset[str] = frozenset()
    """The query's names the plan read as the project's speakers (left out of its semantic text); cursors keep them."""
    ranking_changed: bool = False
    """A later page cut from a ranking made now, not the one its first page came from (that one is held only
    by the replica that made it, and only while its cache keeps it), or from one whose earlier hits are not
    those the earlier pages served: hits may repeat or be missed across pages."""
    served_digest: str | None = None
    """`app.search.paging.served_digest` of the ranking's hits up to `next_offset`: the next page's cursor keeps it."""


# What an answer costs in memory, estimated without walking it. Calibrated on SciFact answers (CPython
# 3.11, 64-bit): a fused hit with its chunk, four small maps and its strings' headers ~2 KiB besides the
# texts; a leg hit (three short strings and a float) ~0.4 KiB; the analysis, plan and result ~4 KiB.
OUTCOME_BASE_BYTES: Final = 4096
FUSED_HIT_BYTES: Final = 2048
LEG_HIT_BYTES: Final = 400
QUERY_BYTES_PER_CHARACTER: Final = 20
"""The analysis holds the query's text several times over and a string per token: 14 to 16 bytes per character
measured (tracemalloc, 200 to 8,000 characters), the plan's texts besides. Uncounted, an answer to an 8,000-character
query with few hits was charged ~7 KiB for ~110 KiB held, and the byte bound let the cache pass a GiB."""


def outcome_size_bytes(outcome: SearchOutcome) -> int:
    """An estimate of the memory `outcome` holds, for the query cache's byte bound.

    Texts count a byte per character (what CPython stores for ASCII; wider text is under-counted up to
    4x, which the fixed per-hit costs absorb for the short chunks this serves).
    """
    result = outcome.result
    total = OUTCOME_BASE_BYTES + LEG_HIT_BYTES * sum(len(hits) for hits in result.leg_hits.values())
    total += QUERY_BYTES_PER_CHARACTER * len(outcome.analysis.raw_query)
    for hit in result.hits:
        chunk = hit.chunk
        total += FUSED_HIT_BYTES + len(chunk.text) + len(chunk.context) + len(chunk.source)
        total += len(chunk.section_title) + sum(map(len, chunk.breadcrumb)) + sum(map(len, chunk.tags))
    return total
