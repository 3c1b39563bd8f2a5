"""Neighbour sharing over a fused ranking: a turn gains part of the best score among nearby turns. Pure.

In a conversation the evidence for a question often sits next to the turn that matches its words: the
answer follows the question, the date is in the turn before. LoCoMo (docs/evaluation.md, "Several hops"):
a turn gaining 0.4 of the best positive fused score among the candidate turns at most 2 turns away raised
Recall@10 by +0.031 on the tuning conversations and +0.030 on the held-out ones (held-out open-domain
questions lost 0.027, all ten conversations' 0.003): on by default (`NEIGHBOUR_SCORE_SHARE` 0.4).

Turns are read from document ids: `<sequence>:<n>` (a trailing integer after the last colon, e.g.
`conv-26:D3:7`, turn 7 of `conv-26:D3`); hits of other ids have no neighbours and gain nothing. Two turns
are neighbours only when they also carry one event time (a conversation's session): ids alone would make
`ticket:1234` and `ticket:1235` neighbours, and unrelated records numbered in a row share nothing. Only
hits in the candidate list count (nothing is fetched). The gain is its own contribution (`neighbours`),
so `score` stays the sum of `contributions`; hits are re-ordered, tied ones kept in the order fusion gave them.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Final

from app.retrieval.fusion import best_first, with_contributions

if TYPE_CHECKING:
    from collections.abc import Sequence
    from datetime import datetime

    from app.domain.models import FusedHit
    from app.domain.reordering import NeighbourSharing

NEIGHBOUR_CONTRIBUTION: Final = "neighbours"
TURN_SEPARATOR: Final = ":"

Turn = tuple["datetime", str, int]
"""A turn's session (its event time), sequence and number."""


def turn_of(document_id: str) -> tuple[str, int] | None:
    """`conv-26:D3:7` -> (`conv-26:D3`, 7): the sequence and turn number; None when the id names no turn."""
    sequence, separator, number = document_id.rpartition(TURN_SEPARATOR)
    if not (sequence and separator and number.isascii() and number.isdigit()):
        return None
    return sequence, int(number)


def share_neighbour_scores(hits: Sequence[FusedHit], sharing: NeighbourSharing) -> list[FusedHit]:
    """`hits` each raised by `share` x the best positive score of a neighbouring turn among them, best first.

    The neighbours' scores are read before any hit is raised, so no score depends on the order of `hits`
    (tied hits keep it: fusion's, best first with its tie-break). A turn with several chunks counts with
    its best one. Unchanged order when sharing is off.
    """
    if not sharing.changes_ranking:
        return list(hits)
    # On by default for every hybrid search: each turn is read once, and a list without one dated turn
    # (runbooks, abstracts) costs one pass.
    turns = [_session_turn(hit) for hit in hits]
    best: dict[Turn, float] = {}
    for hit, turn in zip(hits, turns, strict=True):
        if turn is not None:
            best[turn] = max(best.get(turn, -math.inf), hit.score)
    if not best:
        return best_first(hits)
    shared = []
    for hit, turn in zip(hits, turns, strict=True):
        gain = sharing.share * _best_neighbour(turn, best, sharing.window_turns)
        if gain <= 0:
            shared.append(hit)
            continue
        shared.append(with_contributions(hit, {NEIGHBOUR_CONTRIBUTION: gain}))
    return best_first(shared)


def _session_turn(hit: FusedHit) -> Turn | None:
    """(event time, sequence, turn number) of a dated turn; None for an undated chunk or an id naming no turn."""
    turn = turn_of(hit.chunk.document_id)
    if turn is None or hit.chunk.event_time is None:
        return None
    return hit.chunk.event_time, *turn


def _best_neighbour(turn: Turn | None, best: dict[Turn, float], window: int) -> float:
    """The best positive score among the turns at most `window` away from `turn` (itself excluded); else 0."""
    if turn is None:
        return 0.0
    moment, sequence, number = turn
    scores = (
        best.get((moment, sequence, number + offset), 0.0)
        for distance in range(1, window + 1)
        for offset in (-distance, distance)
    )
    return max(0.0, *scores)
