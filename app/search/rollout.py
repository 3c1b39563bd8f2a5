"""Traffic split between the hybrid and the semantic-only arm, sticky per caller and equal on every replica."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Final, Literal

from app.domain.labels import HYBRID_ARM, SEMANTIC_ARM

if TYPE_CHECKING:
    from collections.abc import Sequence

Arm = Literal["hybrid", "semantic"]

BUCKETS: Final = 10_000
"""Callers hash into this many buckets, so the split has a resolution of 0.01 percentage points."""


def caller_bucket(caller_key: str) -> int:
    """The caller's bucket in [0, BUCKETS): SHA-256 of the key, the same in every process and replica."""
    digest = hashlib.sha256(caller_key.encode()).digest()
    return int.from_bytes(digest[:8], "big") % BUCKETS


def assign_arm(caller_key: str, *, hybrid_percent: float) -> Arm:
    """Return `"hybrid"` for a `hybrid_percent` (0-100, clamped) share of callers, else `"semantic"`.

    Sticky: the same key gets the same arm on every call, process and replica. Monotone: raising
    the percentage only moves callers from semantic to hybrid, never back.
    """
    threshold = round(min(max(hybrid_percent, 0.0), 100.0) * BUCKETS / 100)
    return HYBRID_ARM if caller_bucket(caller_key) < threshold else SEMANTIC_ARM


def caller_key(subject: str | None, client_id_header: str | None, client_address: str | None) -> str:
    """Who the caller is, for stickiness: the JWT subject, else `X-Client-Id`, else the client address.

    The kind is part of the key, so a subject and a client id spelled alike are different callers.
    Callers with none of the three share the key `"anonymous"`.
    """
    for kind, value in (("sub", subject), ("client", client_id_header), ("addr", client_address)):
        if value is not None and value.strip():
            return f"{kind}:{value.strip()}"
    return "anonymous"


def overlap_at_k(a_ids: Sequence[str], b_ids: Sequence[str], k: int = 10) -> float:
    """Share of the top-`k` ids the two rankings have in common, in [0, 1].

    Divides by the longer of the two top-`k` lists (distinct ids), not by `k`, so two identical short
    rankings (a project with fewer than `k` matches) overlap fully. Two empty rankings overlap fully too.
    """
    top_a, top_b = set(a_ids[:k]), set(b_ids[:k])
    longest = max(len(top_a), len(top_b))
    if longest == 0:
        return 1.0
    return len(top_a & top_b) / longest
