"""Rank fusion: merge several best-first hit lists (one per leg) into one ranking. Pure functions.

Contracts shared by every function here:
- Input lists are best first; a hit's rank is its 1-based position in its list. When a leg lists a
  chunk twice, only its first (best) position counts.
- Inputs are never changed; outputs are new frozen `FusedHit`s, best first.
- A chunk found by one leg only is kept (with no rank or contribution for the other leg).
- Ties break on what found the chunk, then on chunk id (ascending), so every replica returns the same order:
  of two chunks with equal scores, the one found by legs of more weight comes first. With a leg weighed 0,
  the other leg's lowest hit would otherwise tie with every chunk it missed and follow them by id.
- `score` is the exact sum (`math.fsum`) of `contributions`, so it does not depend on leg order.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Final

from app.domain.models import LEXICAL_LEG, SEMANTIC_LEG, FusedHit, FusionMethod, FusionSettings, ScoredHit

if TYPE_CHECKING:
    from app.domain.models import Chunk

NEUTRAL_WEIGHT: Final = 1.0
"""The weight of a leg `weights` does not name. The tuned weights and k are knobs (`app/knobs.py`),
never defaults here: the planner always passes them."""

IDENTICAL_SCORES_NORMALISED: Final = 0.5
"""Min-max of a list whose scores are all equal: the reference maps every score to the middle."""
IDENTICAL_SCORES_Z: Final = 2.5
"""z-score fusion: what each hit of a leg whose hits all scored alike (one hit, or ties) gets, where the
z-score itself is undefined: about what the best of a leg's usual 50 to 100 hits gets (the expected
largest of that many standard normal draws is 2.25 to 2.5). A leg that found one chunk then ranks it as
a leg of its usual size ranks its best. At 0, the only chunk holding a rare word (an error code, a ticket
id) came 21st in hybrid, below semantic hits of no relevance, which z-scores spread as widely as good ones."""
IDENTICAL_SCORES_FLOOR_Z: Final = -1.0
"""z-score fusion: what a chunk gets from a leg that missed it when that leg's hits all scored alike. The
other legs' rule, the lowest z returned, would be the hits' own here and let such a leg say nothing: one
lexical hit with the semantic leg weighed 0 came last, and every final_score read 0."""


@dataclass(slots=True)
class _Entry:
    chunk: Chunk
    ranks: dict[str, int] = field(default_factory=dict)
    leg_scores: dict[str, float] = field(default_factory=dict)
    contributions: dict[str, float] = field(default_factory=dict)


def reciprocal_rank_fusion(
    ranked: Mapping[str, Sequence[ScoredHit]],
    *,
    k: int,
    weights: Mapping[str, float] | None = None,
    limit: int | None = None,
) -> list[FusedHit]:
    """Fuse per-leg rankings with (weighted) RRF: `score = sum over legs of weight / (k + rank)`.

    Uses ranks only, so BM25 and cosine scores never need a common scale. A leg missing from
    `weights` weighs 1.0. A chunk at the same rank in two lists always outranks one found in only one.
    Raises `ValueError` for a negative `k`, weight or `limit`.
    """
    _check_non_negative(k=k, limit=limit, weights=weights)
    positions = _ranked_positions(ranked)
    entries = _collect(positions)
    for leg, leg_positions in positions.items():
        weight = _weight(weights, leg, default=1.0)
        for rank, chunk_id, _ in leg_positions:
            entries[chunk_id].contributions[leg] = weight / (k + rank)
    return _ordered(entries, limit, _leg_weights(positions, weights, default=1.0))


def min_max_normalize(scores: Sequence[float]) -> list[float]:
    """Scale scores to [0, 1] by `(s - min) / (max - min)`; all-equal scores all become 0.5."""
    if not scores:
        return []
    low, high = min(scores), max(scores)
    if high == low:
        return [IDENTICAL_SCORES_NORMALISED] * len(scores)
    return [(score - low) / (high - low) for score in scores]


def weighted_score_fusion(
    ranked: Mapping[str, Sequence[ScoredHit]],
    *,
    weights: Mapping[str, float] | None = None,
    limit: int | None = None,
) -> list[FusedHit]:
    """Weighted linear fusion of min-max normalised scores: `score = sum of weight * normalised`.

    Each leg's scores are normalised over that leg's list; a leg that missed a chunk adds 0.
    Legs missing from `weights` (or all legs, without `weights`) weigh `NEUTRAL_WEIGHT`.
    """
    _check_non_negative(limit=limit, weights=weights)
    positions = _ranked_positions(ranked)
    entries = _collect(positions)
    for leg, leg_positions in positions.items():
        weight = _weight(weights, leg, default=NEUTRAL_WEIGHT)
        normalised = min_max_normalize([hit.score for _, _, hit in leg_positions])
        for (_, chunk_id, _), value in zip(leg_positions, normalised, strict=True):
            entries[chunk_id].contributions[leg] = weight * value
    return _ordered(entries, limit, _leg_weights(positions, weights, default=NEUTRAL_WEIGHT))


def zscore_fusion(
    ranked: Mapping[str, Sequence[ScoredHit]],
    *,
    weights: Mapping[str, float] | None = None,
    limit: int | None = None,
) -> list[FusedHit]:
    """Distribution-based fusion: standardise each leg's scores (z-scores), then sum them weighted.

    A chunk a leg did not return gets that leg's floor, the lowest z it returned, and the floor appears
    in `contributions` (so the score is still their sum). A leg whose scores are all equal (one hit, or
    ties) gives each of its hits `IDENTICAL_SCORES_Z` and the chunks it did not return
    `IDENTICAL_SCORES_FLOOR_Z`: it still says which chunks it found, as strongly as a leg says which is
    its best. Scores can be negative; higher is still better. Weights as `weighted_score_fusion`.
    """
    _check_non_negative(limit=limit, weights=weights)
    positions = _ranked_positions(ranked)
    entries = _collect(positions)
    for leg, leg_positions in positions.items():
        if not leg_positions:
            continue
        weight = _weight(weights, leg, default=NEUTRAL_WEIGHT)
        scores = [hit.score for _, _, hit in leg_positions]
        mean, deviation = _mean_and_deviation(scores)
        standardised = {
            chunk_id: (hit.score - mean) / deviation if deviation > 0 else IDENTICAL_SCORES_Z
            for _, chunk_id, hit in leg_positions
        }
        floor = min(standardised.values()) if deviation > 0 else IDENTICAL_SCORES_FLOOR_Z
        for chunk_id, entry in entries.items():
            entry.contributions[leg] = weight * standardised.get(chunk_id, floor)
    return _ordered(entries, limit, _leg_weights(positions, weights, default=NEUTRAL_WEIGHT))


def _mean_and_deviation(scores: Sequence[float]) -> tuple[float, float]:
    """Mean and population standard deviation in floats (`statistics.pstdev` is exact, and 10x slower)."""
    mean = math.fsum(scores) / len(scores)
    return mean, math.sqrt(math.fsum((score - mean) ** 2 for score in scores) / len(scores))


def rank_single_leg(hits: Sequence[ScoredHit], *, leg: str, limit: int | None = None) -> list[FusedHit]:
    """One leg's hits as fused hits, best first: the score is the leg's own score (its only contribution).

    Ties go by chunk id, as in fusion: an engine returns equal scores in whatever order it reads them (a
    parallel scan of PostgreSQL differs from run to run), and replicas must agree.
    """
    _check_non_negative(limit=limit)
    positions = _ranked_positions({leg: sorted(hits, key=lambda hit: (-hit.score, hit.chunk.chunk_id))})
    entries = _collect(positions)
    for _, chunk_id, hit in positions[leg]:
        entries[chunk_id].contributions[leg] = hit.score
    fused = [_freeze(entry) for entry in entries.values()]  # insertion order is the sorted order
    return fused if limit is None else fused[:limit]


_Fusion = Callable[[Mapping[str, Sequence[ScoredHit]], FusionSettings, int | None], list[FusedHit]]

_FUSIONS: Final[Mapping[FusionMethod, _Fusion]] = {
    FusionMethod.RRF: lambda ranked, settings, limit: reciprocal_rank_fusion(
        ranked, k=settings.rrf_k, weights=settings.weights or None, limit=limit
    ),
    FusionMethod.WEIGHTED: lambda ranked, settings, limit: weighted_score_fusion(
        ranked, weights=settings.weights or None, limit=limit
    ),
    FusionMethod.ZSCORE: lambda ranked, settings, limit: zscore_fusion(
        ranked, weights=settings.weights or None, limit=limit
    ),
}


def fuse(
    ranked: Mapping[str, Sequence[ScoredHit]], settings: FusionSettings, *, limit: int | None = None
) -> list[FusedHit]:
    """Fuse with the method `settings` names; empty `settings.weights` means that method's defaults."""
    return _FUSIONS[settings.method](ranked, settings, limit)


def _check_non_negative(*, k: int = 0, limit: int | None = None, weights: Mapping[str, float] | None = None) -> None:
    if k < 0:
        msg = f"k must be >= 0, got {k}"
        raise ValueError(msg)
    if limit is not None and limit < 0:
        msg = f"limit must be >= 0, got {limit}"
        raise ValueError(msg)
    for leg, weight in (weights or {}).items():
        if not weight >= 0:  # also rejects NaN
            msg = f"weight of leg {leg!r} must be >= 0, got {weight}"
            raise ValueError(msg)


def _weight(weights: Mapping[str, float] | None, leg: str, *, default: float) -> float:
    return default if weights is None else weights.get(leg, default)


_Position = tuple[int, str, ScoredHit]
"""A hit's 1-based rank in its leg, its chunk id (read once: fusion runs on every search) and the hit."""


def _ranked_positions(ranked: Mapping[str, Sequence[ScoredHit]]) -> dict[str, list[_Position]]:
    """Per leg, the position of each chunk's first occurrence."""
    positions: dict[str, list[_Position]] = {}
    for leg, hits in ranked.items():
        seen: set[str] = set()
        kept: list[_Position] = []
        for rank, hit in enumerate(hits, start=1):
            chunk_id = hit.chunk.chunk_id
            if chunk_id not in seen:  # a leg can list a chunk twice; its best rank counts
                seen.add(chunk_id)
                kept.append((rank, chunk_id, hit))
        positions[leg] = kept
    return positions


def _collect(positions: Mapping[str, Sequence[_Position]]) -> dict[str, _Entry]:
    """One entry per chunk with its ranks and raw scores; the chunk value comes from its first leg."""
    entries: dict[str, _Entry] = {}
    for leg, leg_positions in positions.items():
        for rank, chunk_id, hit in leg_positions:
            entry = entries.get(chunk_id)
            if entry is None:
                entry = entries[chunk_id] = _Entry(chunk=hit.chunk)
            entry.ranks[leg] = rank
            entry.leg_scores[leg] = hit.score
    return entries


def _freeze(entry: _Entry) -> FusedHit:
    # The entry's dicts pass over as they are: an entry is dropped once frozen, so nothing changes them.
    return FusedHit(
        chunk=entry.chunk,
        score=math.fsum(entry.contributions.values()),
        ranks=entry.ranks,
        leg_scores=entry.leg_scores,
        contributions=entry.contributions,
    )


def _leg_weights(
    positions: Mapping[str, object], weights: Mapping[str, float] | None, *, default: float
) -> dict[str, float]:
    return {leg: _weight(weights, leg, default=default) for leg in positions}


def _ordered(entries: Mapping[str, _Entry], limit: int | None, leg_weights: Mapping[str, float]) -> list[FusedHit]:
    """Best first; a tie goes to the chunk found by legs of more total weight, then to the lower chunk id."""

    def order(hit: FusedHit) -> tuple[float, float, str]:
        # fsum is exact, so the sum does not depend on the order the legs are listed in.
        return -hit.score, -math.fsum(leg_weights[leg] for leg in hit.ranks), hit.chunk_id

    fused = sorted((_freeze(entry) for entry in entries.values()), key=order)
    return fused if limit is None else fused[:limit]


def best_first(hits: Iterable[FusedHit]) -> list[FusedHit]:
    """`hits` by score, highest first; tied hits keep their order in `hits` (deterministic when it is).

    For re-ordering a fused ranking after boosts: ties stay as fusion broke them.
    """
    return sorted(hits, key=lambda hit: -hit.score)


def with_contributions(hit: FusedHit, extra: Mapping[str, float]) -> FusedHit:
    """`hit` with `extra` added to its contributions; its score stays their sum (what `explain` shows)."""
    contributions = {**hit.contributions, **extra}
    return replace(hit, score=math.fsum(contributions.values()), contributions=contributions)


def cascade_ranking(semantic_hits: Sequence[ScoredHit], lexical_hits: Sequence[ScoredHit]) -> list[FusedHit]:
    """The cascading strategy's ranking: lexical candidates ordered by vector similarity.

    The score is the semantic similarity (its only contribution); ranks and raw scores of both legs
    are reported. Semantic hits that are not lexical candidates are dropped: the lexical stage decides
    what may be returned. Order follows `semantic_hits`, ties broken by chunk id.
    """
    lexical_positions = {
        chunk_id: (rank, hit) for rank, chunk_id, hit in _ranked_positions({LEXICAL_LEG: lexical_hits})[LEXICAL_LEG]
    }
    fused: list[FusedHit] = []
    for rank, chunk_id, hit in _ranked_positions({SEMANTIC_LEG: semantic_hits})[SEMANTIC_LEG]:
        candidate = lexical_positions.get(chunk_id)
        if candidate is None:
            continue
        lexical_rank, lexical_hit = candidate
        entry = _Entry(chunk=hit.chunk)
        entry.ranks.update({SEMANTIC_LEG: rank, LEXICAL_LEG: lexical_rank})
        entry.leg_scores.update({SEMANTIC_LEG: hit.score, LEXICAL_LEG: lexical_hit.score})
        entry.contributions[SEMANTIC_LEG] = hit.score
        fused.append(_freeze(entry))
    # Ties on chunk id, not in the vector read's order: PostgreSQL orders equal distances as it likes.
    return sorted(fused, key=lambda hit: (-hit.score, hit.chunk_id))
