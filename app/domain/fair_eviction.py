"""A bounded cache shared by scopes (projects) in which one scope's traffic cannot evict another's share.

Every entry is charged (bytes, or 1 for a count bound) and belongs to one scope. When a put takes the
charges past `capacity`, the scope charged the most gives up its least recently used entry, again until
they fit. So a scope charged no more than an equal share of `capacity` never loses an entry to another
scope's puts, however many distinct keys that scope sends, while a scope alone still fills the whole
cache; within a scope, eviction stays least-recently-used. (One exception: the entry being put is never
evicted for itself, so a scope's first entry, charged more than the others' shares, takes its room from
the next largest scope.) A plain LRU evicts the least recent entry of
all, so one scope sending many distinct keys emptied the cache for every other.

With `ttl_s`, an entry also lives `ttl_s` after its put (cachetools `TTLCache` semantics: gone at
`now >= put + ttl_s`, a read does not extend it); expired entries leave before any live one is evicted.
The TTL is one for the whole cache, so the order of puts is the order of expiry.

Pure and not thread-safe: callers hold their own lock and pass the clock's `now`. Each operation is
O(1), except that finding the scope charged the most is O(log scopes) (a heap whose stale rows are
skipped and which is rebuilt once it holds many more rows than there are scopes).
"""

from __future__ import annotations

import heapq
import math
from collections import OrderedDict
from dataclasses import dataclass
from typing import Final, Generic, TypeVar

Key = TypeVar("Key")
Value = TypeVar("Value")

STALE_ROWS_KEPT: Final = 64
"""Stale rows the heap of scope charges may hold beyond twice the scope count before it is rebuilt."""


@dataclass(slots=True)
class _Entry(Generic[Value]):
    scope: str
    charge: int
    value: Value
    expires_at: float


class ScopeFairCache(Generic[Key, Value]):
    """Entries by key, each in one scope; past `capacity` the scope charged the most loses its least recent."""

    def __init__(self, *, capacity: int, ttl_s: float | None = None) -> None:
        if capacity < 1 or (ttl_s is not None and ttl_s <= 0):
            msg = f"capacity must be >= 1 and ttl_s > 0 or None (got {capacity}, {ttl_s})"
            raise ValueError(msg)
        self.capacity, self._ttl_s = capacity, ttl_s
        self.charged = 0
        """The sum of the entries' charges (expired entries included until `expire` or a put drops them)."""
        self._entries: dict[Key, _Entry[Value]] = {}
        self._recency: dict[str, OrderedDict[Key, None]] = {}  # per scope, least recently used first
        self._charges: dict[str, int] = {}  # per scope holding entries, their charges' sum
        self._put_order: OrderedDict[Key, None] = OrderedDict()  # with a TTL: oldest put (first to expire) first
        self._largest: list[tuple[int, str]] = []  # heap of (-charge, scope); a row is stale once that changed

    def get(self, key: Key, *, now: float = 0.0) -> Value | None:
        """The value under `key`, now its scope's most recently used; None when absent or expired."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        if now >= entry.expires_at:
            self._remove(key)
            return None
        self._recency[entry.scope].move_to_end(key)
        return entry.value

    def put(self, key: Key, value: Value, *, scope: str, charge: int, now: float = 0.0) -> bool:
        """Store `value` under `key` in `scope`, evicting as above; False (nothing changed) when `charge` > capacity.

        The entry being put is never the one evicted for it: when its scope holds nothing else, the
        scope charged the most after it gives up an entry instead.
        """
        if charge > self.capacity:
            return False
        self.expire(now)
        if key in self._entries:
            self._remove(key)
        expires_at = math.inf if self._ttl_s is None else now + self._ttl_s
        self._entries[key] = _Entry(scope, charge, value, expires_at)
        recency = self._recency.get(scope)
        if recency is None:
            recency = self._recency[scope] = OrderedDict()
        recency[key] = None
        if self._ttl_s is not None:
            self._put_order[key] = None
        self.charged += charge
        self._add_charge(scope, charge)
        while self.charged > self.capacity:
            self._remove(self._victim(protected=key))
        return True

    def expire(self, now: float) -> None:
        """Drop every entry whose TTL has run out at `now`."""
        while self._put_order:
            oldest = next(iter(self._put_order))
            if now < self._entries[oldest].expires_at:
                return
            self._remove(oldest)

    def clear(self) -> None:
        """Drop every entry."""
        self.charged = 0
        for container in (self._entries, self._recency, self._charges, self._put_order):
            container.clear()
        self._largest.clear()

    def __len__(self) -> int:
        return len(self._entries)

    def _victim(self, *, protected: Key) -> Key:
        """The least recent key of the scope charged the most (ties: the least scope name), never `protected`."""
        passed_over: list[tuple[int, str]] = []
        try:
            while True:
                row = heapq.heappop(self._largest)
                negative_charge, scope = row
                if self._charges.get(scope) != -negative_charge:
                    continue  # stale: the scope's charge changed since this row was pushed
                least_recent = next(iter(self._recency[scope]))
                if least_recent != protected:
                    # The victim's removal pushes the scope's new charge; this row would be stale.
                    return least_recent
                passed_over.append(row)  # the scope holds only the entry being put
        finally:
            for row in passed_over:
                heapq.heappush(self._largest, row)

    def _remove(self, key: Key) -> None:
        entry = self._entries.pop(key)
        del self._recency[entry.scope][key]
        self._put_order.pop(key, None)
        self.charged -= entry.charge
        self._add_charge(entry.scope, -entry.charge)

    def _add_charge(self, scope: str, delta: int) -> None:
        charge = self._charges.get(scope, 0) + delta
        if charge == 0 and not self._recency[scope]:
            del self._charges[scope], self._recency[scope]
            return
        self._charges[scope] = charge
        heapq.heappush(self._largest, (-charge, scope))
        if len(self._largest) > 2 * len(self._charges) + STALE_ROWS_KEPT:
            self._largest = [(-held, name) for name, held in self._charges.items()]
            heapq.heapify(self._largest)
