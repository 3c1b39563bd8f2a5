"""What may re-order a fused ranking after fusion, per query: evidence preferences and neighbour sharing.

Frozen values carried by a `SearchPlan`; `app/retrieval/evidence.py` and `app/retrieval/neighbours.py` apply them.
The defaults change nothing.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class EvidencePreferences:
    """What the fused ranking should prefer for one query, and how strongly (`app/retrieval/evidence.py`).

    `names`: people, places or things the query names (lowercase); a hit whose title/breadcrumb names one
    (who said a turn) gains `entity_boost` once, a hit whose text mentions one gains `mention_boost` once.
    `prefer_dated`: the query asks *when*; a hit whose text carries a date or a relative date ("yesterday",
    "last week") gains `date_boost`. `prefer_recent`: the query asks for the latest/current state; hits gain
    up to `recency_boost` by their event time's place among the candidates (newest most). Boosts are added
    to the fusion score (a z-score sum, so 0.5 is about half a standard deviation of one leg).
    The defaults change nothing.
    """

    names: tuple[str, ...] = ()
    entity_boost: float = 0.0
    mention_boost: float = 0.0
    prefer_dated: bool = False
    date_boost: float = 0.0
    prefer_recent: bool = False
    recency_boost: float = 0.0

    @property
    def changes_ranking(self) -> bool:
        """Whether applying these preferences can move any hit."""
        by_name = bool(self.names) and (self.entity_boost > 0 or self.mention_boost > 0)
        return by_name or (self.prefer_dated and self.date_boost > 0) or (self.prefer_recent and self.recency_boost > 0)


@dataclass(frozen=True, slots=True)
class NeighbourSharing:
    """How much of its neighbours' fused scores a hit gains (`app/retrieval/neighbours.py`).

    Neighbours are turns of one sequence: hits whose document ids read `<sequence>:<turn number>` with the
    same sequence and turn numbers at most `window_turns` apart. `share` 0 (the default) changes nothing.
    """

    share: float = 0.0
    window_turns: int = 0

    @property
    def changes_ranking(self) -> bool:
        """Whether sharing can move any hit."""
        return self.share > 0 and self.window_turns > 0
