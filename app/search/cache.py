"""TTL query cache: answers for repeated searches, keyed by the project's generation in the document store."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Final, Generic, Protocol, TypeVar

from cachetools import LRUCache

from app.domain.errors import EngineError
from app.domain.fair_eviction import ScopeFairCache
from app.observability.metrics import record_cache_lookup

if TYPE_CHECKING:
    from collections.abc import Callable, Hashable

    from app.domain.models import SearchPlan

ValueT = TypeVar("ValueT")

logger = logging.getLogger(__name__)

DEFAULT_MAX_BYTES: Final = 64 * 1024 * 1024
GENERATIONS_KEPT: Final = 65536
"""Projects whose highest generation read is remembered (least recently read go first), to see one go back."""


class Generations(Protocol):
    """Where the cache reads a project's generation: the document store."""

    async def project_generation(self, project_id: str) -> int:
        """The project's generation now; it moves on with every write that changes its answers."""
        ...


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
    """A bounded, thread-safe TTL cache of search responses, shared fairly by projects (behind a lock).

    `ttl_s` is seconds an entry lives; `max_size` the most entries kept; `max_bytes` the most memory
    the entries may hold, as `size_of` estimates it. An answer carries its candidates' texts, so
    entries are tens of kilobytes: a count alone let a full cache of 10,000 grow a replica by ~0.7 GiB
    (docs/soak.md). Both bounds are one charge: each entry is charged `max(size_of(value), max_bytes //
    max_size)`, so the charges stay within `max_bytes` and no more than `max_size` entries fit. An entry
    larger than `max_bytes` is not kept. Full, the cache evicts from the project charged the most, its
    least recently used answer first (`ScopeFairCache`): one project sending many distinct queries no
    longer evicts every other project's answers, and a project alone still fills the cache.
    Any of `ttl_s`, `max_size`, `max_bytes` at 0 disables the cache: `get` always answers None, `put`
    keeps nothing, and nothing is counted. Lookups count into `poimen_query_cache_requests_total`. Every
    call holds the lock only for a dictionary operation, never across I/O, so it is safe from async
    handlers and worker threads.
    """

    def __init__(
        self,
        *,
        ttl_s: float,
        max_size: int,
        max_bytes: int = DEFAULT_MAX_BYTES,
        size_of: Callable[[ValueT], int] = lambda _value: 0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._clock = clock
        self.ttl_s, self.max_size, self.max_bytes = ttl_s, max_size, max_bytes
        self._size_of = size_of
        self._min_charge = max_bytes // max_size if max_size > 0 else 0
        self.enabled = ttl_s > 0 and max_size > 0 and max_bytes > 0
        self._entries = self._new_entries()
        self._highest: LRUCache[str, int] = LRUCache(maxsize=GENERATIONS_KEPT)
        self._lock = threading.Lock()

    def _new_entries(self) -> ScopeFairCache[QueryCacheKey, ValueT]:
        # Disabled, nothing is ever stored: any valid capacity and TTL will do.
        return ScopeFairCache(capacity=max(self.max_bytes, 1), ttl_s=self.ttl_s if self.ttl_s > 0 else None)

    def set_ttl(self, ttl_s: float) -> None:
        """Apply a new TTL (the hot-reloadable `QUERY_CACHE_TTL_SECS` flag); 0 disables the cache.

        A changed TTL starts from an empty cache: entries keep the expiry they were stored with, and a
        flags change makes them unreachable anyway, since the flags version is part of every key.
        """
        with self._lock:
            if ttl_s == self.ttl_s:
                return
            self.ttl_s = ttl_s
            self.enabled = ttl_s > 0 and self.max_size > 0 and self.max_bytes > 0
            self._entries = self._new_entries()

    async def read_generation(self, generations: Generations, project_id: str) -> int:
        """The project's generation now, from `generations`; one lower than a read that ended earlier empties the cache.

        Generations only grow, so a lower one means PostgreSQL was set back while this process ran (restored
        to an earlier point, the data folder swapped): every project's counter went back, and its writes
        since count up through numbers this cache holds answers under, for other content. The first such
        read, of any project, drops every entry. Compared with the highest generation read before this read
        began: a read that began before a write may end after one that began after it, and is no regression.
        """
        with self._lock:
            earlier = self._highest.get(project_id)
        generation = await generations.project_generation(project_id)
        with self._lock:
            if earlier is not None and generation < earlier:
                self._entries.clear()
                self._highest.clear()
                logger.warning(
                    "project generation went back from %d to %d (PostgreSQL restored?): query cache emptied",
                    earlier,
                    generation,
                )
            self._highest[project_id] = max(generation, self._highest.get(project_id, generation))
        return generation

    async def generation_or_none(self, generations: Generations | None, project_id: str) -> int | None:
        """`read_generation`, 0 without `generations` (nothing to read), None when the store cannot answer."""
        if generations is None:
            return 0
        try:
            return await self.read_generation(generations, project_id)
        except EngineError:
            return None

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
            value = self._entries.get(key, now=self._clock())
        record_cache_lookup(hit=value is not None)
        return value

    def put(self, key: QueryCacheKey, value: ValueT) -> None:
        """Store `value` under `key` for `ttl_s` seconds (nothing when disabled)."""
        if not self.enabled:
            return
        charge = max(self._size_of(value), self._min_charge)
        with self._lock:
            self._entries.put(key, value, scope=key.project_id, charge=charge, now=self._clock())

    @property
    def charged_bytes(self) -> int:
        """The bytes the entries are charged, by `size_of` (at least `max_bytes // max_size` each)."""
        with self._lock:
            self._entries.expire(self._clock())
            return self._entries.charged

    def clear(self) -> None:
        """Drop every entry."""
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        with self._lock:
            self._entries.expire(self._clock())
            return len(self._entries)
