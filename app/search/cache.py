"""TTL query cache: answers for repeated searches, dropped per project when that project changes."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Generic, TypeVar

from cachetools import TTLCache

from app.observability.metrics import record_cache_lookup

if TYPE_CHECKING:
    from collections.abc import Callable, Hashable

    from app.domain.models import SearchPlan

ValueT = TypeVar("ValueT")


@dataclass(frozen=True, slots=True)
class QueryCacheKey:
    """Everything that changes a search's answer. Build it with `QueryCache.make_key`.

    `generation` is the project's write generation when the key was made: a write bumps it, so
    entries cached before the write can no longer be found (they expire by TTL or size). `plan` is
    every field of the search plan, weights as sorted pairs.
    """

    project_id: str
    generation: int
    query: str
    plan: Hashable
    knobs_version: int
    arm: str
    auth_scope: str


def plan_fingerprint(plan: SearchPlan) -> Hashable:
    """The plan as a hashable value: equal exactly when the plans are equal."""
    fusion = plan.fusion
    own = tuple(getattr(plan, field.name) for field in fields(plan) if field.name != "fusion")
    return (*own, fusion.method, fusion.rrf_k, tuple(sorted(fusion.weights.items())))


class QueryCache(Generic[ValueT]):
    """A bounded, thread-safe TTL cache of search responses (cachetools `TTLCache` behind a lock).

    `ttl_s` is seconds an entry lives; `max_size` the most entries kept (least recently used go first).
    Either one at 0 disables the cache: `get` always answers None, `put` keeps nothing, and nothing is
    counted. Lookups count into `poimen_query_cache_requests_total`. Every call holds the lock only for
    a dictionary operation, never across I/O, so it is safe from async handlers and worker threads.
    """

    def __init__(self, *, ttl_s: float, max_size: int, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.ttl_s, self.max_size = ttl_s, max_size
        self.enabled = ttl_s > 0 and max_size > 0
        self._entries: TTLCache[QueryCacheKey, ValueT] = TTLCache(maxsize=max(max_size, 1), ttl=ttl_s, timer=clock)
        self._generations: dict[str, int] = {}
        self._lock = threading.Lock()

    def set_ttl(self, ttl_s: float) -> None:
        """Apply a new TTL (the hot-reloadable `QUERY_CACHE_TTL_SECS` flag); 0 disables the cache.

        A changed TTL starts from an empty cache: entries keep the expiry they were stored with, and a
        flags change makes them unreachable anyway, since the flags version is part of every key.
        """
        with self._lock:
            if ttl_s == self.ttl_s:
                return
            self.ttl_s = ttl_s
            self.enabled = ttl_s > 0 and self.max_size > 0
            self._entries = TTLCache(maxsize=max(self.max_size, 1), ttl=ttl_s, timer=self._clock)

    def generation(self, project_id: str) -> int:
        """The project's current write generation (0 until its first invalidation)."""
        with self._lock:
            return self._generations.get(project_id, 0)

    def invalidate_project(self, project_id: str) -> None:
        """Make every entry cached so far for `project_id` unreachable; O(1), no scan."""
        with self._lock:
            self._generations[project_id] = self._generations.get(project_id, 0) + 1

    def make_key(self, *, query: str, plan: SearchPlan, knobs_version: int, arm: str, auth_scope: str) -> QueryCacheKey:
        """Build the key for one search under the project's current generation.

        `query` is the normalized query text; runs of whitespace are collapsed here as well, case is
        kept. `auth_scope` is the caller's authorization scope, so one caller is never served an answer
        built for another's rights; `knobs_version` changes whenever the flags in force change.
        """
        project_id = plan.filters.project_id
        return QueryCacheKey(
            project_id=project_id,
            generation=self.generation(project_id),
            query=" ".join(query.split()),
            plan=plan_fingerprint(plan),
            knobs_version=knobs_version,
            arm=arm,
            auth_scope=auth_scope,
        )

    def get(self, key: QueryCacheKey) -> ValueT | None:
        """The cached value for `key`, or None when absent, expired or the cache is disabled."""
        if not self.enabled:
            return None
        with self._lock:
            value = self._entries.get(key)
        record_cache_lookup(hit=value is not None)
        return value

    def put(self, key: QueryCacheKey, value: ValueT) -> None:
        """Store `value` under `key` for `ttl_s` seconds (nothing when disabled)."""
        if not self.enabled:
            return
        with self._lock:
            self._entries[key] = value

    def clear(self) -> None:
        """Drop every entry (generations are kept, so old keys stay unreachable)."""
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)
