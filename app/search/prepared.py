"""A search prepared up to the cache lookup, and the cache key it is looked up under.

Contracts:
- `PreparedSearch` is what the batch path needs before it embeds every query at once: the plan, the
  rollout arm, the generation read for the key, and the cached answer when there is one.
- `cache_key` gives no key (None, None) when not to cache: the cache is off, or the store could not say
  the generation, so an answer the cache holds might predate a write.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.domain.models import QueryAnalysis, SearchPlan
    from app.search.cache import QueryCache, QueryCacheKey
    from app.search.calls import SearchCall, SearchOutcome
    from app.search.knob_source import ResolvedKnobs


@dataclass(frozen=True, slots=True)
class PreparedSearch:
    """A search up to the cache lookup: what the batch path needs before it embeds every query at once."""

    call: SearchCall
    started: float
    resolved: ResolvedKnobs
    arm: str
    decided_by: str
    analysis: QueryAnalysis
    plan: SearchPlan
    optimize_ms: float
    key: QueryCacheKey | None
    generation: int | None
    cached: SearchOutcome | None
    common_names: frozenset[str] = frozenset()  # the project's speakers, as the plan read them
    pinned: bool = False  # `cached` is the ranking of an earlier generation, which a later page is cut from
    ranking_changed: bool = False  # a later page whose first page's ranking this replica does not hold


def cache_key(  # noqa: PLR0913, PLR0917 - the key is every input that changes the answer
    cache: QueryCache[SearchOutcome],
    call: SearchCall,
    analysis: QueryAnalysis,
    plan: SearchPlan,
    arm: str,
    resolved: ResolvedKnobs,
    *,
    generation: int | None,
) -> tuple[QueryCacheKey | None, int | None]:
    """The cache key under the project's `generation` (read before the search) and that generation.

    The key is None when not to cache: the cache is off, or the store could not say the generation
    (None), so an answer it holds might predate a write. Reading the generation per query is what lets
    no replica serve an answer from before a write acknowledged by another.
    """
    if not cache.enabled or generation is None:
        return None, None
    return cache.make_key(
        query=analysis.normalized,
        plan=plan,
        generation=generation,
        knobs_version=resolved.version,
        knobs=resolved.identity,
        arm=arm,
        auth_scope=call.auth_scope,
    ), generation
