"""Per-caller rate limits: a token bucket per caller key (the rollout caller key: subject, client id or address)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Callable


@dataclass(slots=True)
class _Bucket:
    tokens: float
    refilled_at: float


class CallerRateLimit:
    """Token buckets per caller key: `rate_per_s` tokens a second, at most `burst` saved up.

    `take(key)` returns 0 when the call may go ahead, else the seconds until a token is there. A rate
    of 0 turns the limit off. Thread-safe; the map is bounded by evicting the buckets idle longest.
    """

    MAX_CALLERS: Final = 100_000

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._buckets: dict[str, _Bucket] = {}
        self._lock = threading.Lock()

    def take(self, key: str, *, rate_per_s: float, burst: int) -> float:
        """Spend one token of `key`'s bucket; 0.0 when there was one, else the wait in seconds."""
        if rate_per_s <= 0:
            return 0.0
        now = self._clock()
        with self._lock:
            bucket = self._buckets.get(key)
            if bucket is None:
                if len(self._buckets) >= self.MAX_CALLERS:
                    oldest = min(self._buckets, key=lambda name: self._buckets[name].refilled_at)
                    del self._buckets[oldest]
                bucket = self._buckets[key] = _Bucket(tokens=float(burst), refilled_at=now)
            bucket.tokens = min(float(burst), bucket.tokens + (now - bucket.refilled_at) * rate_per_s)
            bucket.refilled_at = now
            if bucket.tokens >= 1.0:
                bucket.tokens -= 1.0
                return 0.0
            return (1.0 - bucket.tokens) / rate_per_s
