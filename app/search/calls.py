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
