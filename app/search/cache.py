"""TTL query cache: answers for repeated searches, keyed by the project's generation in the document store."""

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

    `generation` is the project's generation in the document store when the key was made (read before
    the search runs): every write, through any replica, moves it on, so entries cached before the
    write can no longer be found on any replica (they expire by TTL or size). `plan` is every field of
    the search plan, weights as sorted pairs. `knobs` is the identity of the knobs resolved for this
    caller (their source's version and every value): with per-caller flags, two callers in one
    `auth_scope` may run under different knobs, and each must find only answers built under its own.
    """

    project_id: str
    generation: int
    query: str
    plan: Hashable
    knobs_version: int
    arm: str
    auth_scope: str
    knobs: Hashable = None


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

    @staticmethod
    def make_key(  # noqa: PLR0913 - the key is by definition every input that changes the answer
        *,
        query: str,
        plan: SearchPlan,
        generation: int,
        knobs_version: int,
        arm: str,
        auth_scope: str,
        knobs: Hashable = None,
    ) -> QueryCacheKey:
        """Build the key for one search under the project's `generation` (read from the store just before).

        `query` is the normalized query text; runs of whitespace are collapsed here as well, case is
        kept. `auth_scope` is the caller's authorization scope, so one caller is never served an answer
        built for another's rights; `knobs_version` changes whenever the flags in force change; `knobs`
        identifies the knobs resolved for this caller (`ResolvedKnobs.identity`).
        """
        return QueryCacheKey(
            project_id=plan.filters.project_id,
            generation=generation,
            query=" ".join(query.split()),
            plan=plan_fingerprint(plan),
            knobs_version=knobs_version,
            arm=arm,
            auth_scope=auth_scope,
            knobs=knobs,
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
        """Drop every entry."""
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)
