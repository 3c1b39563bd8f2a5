"""Diversity over a ranking: at most so many hits of one session near the top, so several sessions get in. Pure.

A question whose evidence lies in several sessions (multi-hop) loses when the page fills with turns of one
session that all echo it. A session is the hits sharing an event time (a conversation's session: every
turn carries its session's date); a hit without an event time is a session of its own document.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

    from app.domain.models import FusedHit


def session_key(hit: FusedHit) -> str:
    """The session a hit belongs to: its event time (ISO) when it has one, else its document."""
    moment = hit.chunk.event_time
    return f"time:{moment.isoformat()}" if moment is not None else f"document:{hit.chunk.document_id}"


def cap_per_session(hits: Sequence[FusedHit], cap: int) -> list[FusedHit]:
    """`hits` with at most `cap` of each session before the rest: the extra ones follow, in their order.

    Nothing is dropped, only moved down; scores are unchanged (so the result is no longer sorted by
    score past the first deferred hit). Raises `ValueError` for a `cap` below 1.
    """
    if cap < 1:
        msg = f"cap must be >= 1, got {cap}"
        raise ValueError(msg)
    counts: dict[str, int] = {}
    kept: list[FusedHit] = []
    deferred: list[FusedHit] = []
    for hit in hits:
        key = session_key(hit)
        counts[key] = counts.get(key, 0) + 1
        (kept if counts[key] <= cap else deferred).append(hit)
    return kept + deferred
