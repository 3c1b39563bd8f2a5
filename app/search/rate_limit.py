"""Per-caller rate limits: a token bucket per caller key (the rollout caller key: subject, client id or address)."""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Callable

MAX_CALLERS: Final = 100_000
_KEY_DIGEST_BYTES: Final = 16


@dataclass(slots=True)
class _Bucket:
    tokens: float
    refilled_at: float


class CallerRateLimit:
    """Token buckets per caller key: `rate_per_s` tokens a second, at most `burst` saved up.

    `take(key)` returns 0 when the call may go ahead, else the seconds until a token is there. A rate
    of 0 turns the limit off. Thread-safe. At most `max_callers` buckets are kept; a new caller evicts the
    one idle longest, in constant time. Keys are kept as 16-byte digests: without auth the key is the
    caller's own `X-Client-Id`, so neither its length nor a flood of new ones may cost more than that.
    """

    def __init__(self, *, clock: Callable[[], float] = time.monotonic, max_callers: int = MAX_CALLERS) -> None:
        self._clock = clock
        self._max_callers = max_callers
        # Least recently used first: every take moves its bucket to the end.
        self._buckets: OrderedDict[bytes, _Bucket] = OrderedDict()
        self._lock = threading.Lock()

    def take(self, key: str, *, rate_per_s: float, burst: int) -> float:
        """Spend one token of `key`'s bucket; 0.0 when there was one, else the wait in seconds."""
        if rate_per_s <= 0:
            return 0.0
        digest = hashlib.blake2b(key.encode(errors="surrogatepass"), digest_size=_KEY_DIGEST_BYTES).digest()
        now = self._clock()
        with self._lock:
            bucket = self._buckets.get(digest)
            if bucket is None:
                while len(self._buckets) >= self._max_callers:
                    self._buckets.popitem(last=False)
                bucket = self._buckets[digest] = _Bucket(tokens=float(burst), refilled_at=now)
            else:
                self._buckets.move_to_end(digest)
            bucket.tokens = min(float(burst), bucket.tokens + (now - bucket.refilled_at) * rate_per_s)
            bucket.refilled_at = now
            if bucket.tokens >= 1.0:
                bucket.tokens -= 1.0
                return 0.0
            return (1.0 - bucket.tokens) / rate_per_s

    def __len__(self) -> int:
        """How many callers have a bucket."""
        return len(self._buckets)
