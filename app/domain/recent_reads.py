"""The last value read per key, trusted for a while: what a replica keeps of a per-project read.

Used where a search needs a slow-changing fact about its project (its row count for the vector plan,
its common title names) and reading it on every search would cost more than a slightly stale answer:

- `fresh(key, now)` is the value stored within `ttl_s` of `now`, else None (the caller reads again);
- `last(key)` is the value however old, for a caller whose re-read fails or that needs the old one;
- `hold(key, now)` marks the last value fresh again while one caller re-reads, so searches arriving
  meanwhile keep it instead of all reading at once;
- `store(key, value, now)` keeps the new value; past `max_keys` the key stored longest ago goes first.

Pure and synchronous: the caller passes the clock's `now`, so tests need no sleeping.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

Key = TypeVar("Key")
Value = TypeVar("Value")


@dataclass(frozen=True, slots=True)
class _Kept(Generic[Value]):
    value: Value
    stored_at: float


class RecentReads(Generic[Key, Value]):
    """Per key, the last value stored and when, for `ttl_s`; at most `max_keys` keys (oldest out first)."""

    def __init__(self, *, ttl_s: float, max_keys: int) -> None:
        if ttl_s < 0 or max_keys < 1:
            msg = f"ttl_s must be >= 0 and max_keys >= 1 (got {ttl_s}, {max_keys})"
            raise ValueError(msg)
        self._ttl_s = ttl_s
        self._max_keys = max_keys
        self._kept: dict[Key, _Kept[Value]] = {}  # insertion order: stored longest ago first

    def fresh(self, key: Key, now: float) -> Value | None:
        """The value stored (or held) within `ttl_s` before `now`; None when there is none."""
        kept = self._kept.get(key)
        return kept.value if kept is not None and now - kept.stored_at <= self._ttl_s else None

    def last(self, key: Key) -> Value | None:
        """The last value stored for `key`, however old; None when none was."""
        kept = self._kept.get(key)
        return None if kept is None else kept.value

    def hold(self, key: Key, now: float) -> None:
        """Count the last value as stored at `now` (a re-read is under way); nothing when there is none."""
        kept = self._kept.get(key)
        if kept is not None:
            self._kept[key] = _Kept(kept.value, now)

    def store(self, key: Key, value: Value, now: float) -> None:
        """Keep `value` for `key` as stored at `now`, dropping the key stored longest ago past `max_keys`."""
        self._kept.pop(key, None)
        self._kept[key] = _Kept(value, now)
        if len(self._kept) > self._max_keys:
            del self._kept[next(iter(self._kept))]

    def __len__(self) -> int:
        return len(self._kept)
