"""Readable relevance: a score in [0, 1] a person can read and threshold (`final_score`, `min_score`). Pure.

Fusion's scores (z-scores, RRF sums) only order one query's hits; this reads each leg's raw similarity on
an absolute scale instead, and never changes the order of hits (`app/retrieval/fusion.py` makes it).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Final

from app.domain.models import LEXICAL_LEG, SEMANTIC_LEG, FusedHit
from app.retrieval.fusion import NEUTRAL_WEIGHT

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

    from app.domain.models import LexicalQuery

BM25_HALF_RELEVANCE: Final = 55.0
"""The BM25 score a readable relevance maps to 0.5 (`bm25 / (bm25 + this)`): the median BM25 of the lexical
leg's first hit is 62.3 on SciFact train and 48.0 on LoCoMo's tuning conversations
(`scripts/calibrate_relevance.py`, docs/evaluation.md "Round 2"), so a typical best lexical match reads as
about half relevant, for a query of `BM25_HALF_TERMS` scored terms. It changes what `final_score` reads,
never the order of hits."""
BM25_HALF_TERMS: Final = 9
"""The scored terms (`scored_terms`) of the query `BM25_HALF_RELEVANCE` is the half point for: SciFact
train's median. BM25 sums over the query's terms, so a longer query's best match scores higher for no better
a match (median first hit 35 at 4 terms, 61 at 9, 89 at 15 on SciFact train): the half point grows as
`(terms / BM25_HALF_TERMS) ** BM25_HALF_EXPONENT`."""
BM25_HALF_EXPONENT: Final = 0.75
"""Chosen on SciFact train (0.3 to 1.0 tried) by how well one threshold on `final_score` parts relevant from
other hits across all queries (pooled AUC of each query's top 10: 0.848 at a fixed half, 0.862 here), and so
on LoCoMo's tuning conversations (0.728 to 0.745) and on SciFact train's claims and abstracts as queries
together (0.796 to 0.848): docs/evaluation.md "Readable scores and query length"."""


def bm25_half_for(query: LexicalQuery) -> float:
    """The BM25 score that reads as half relevant for `query`, by the terms BM25 sums over (`scored_terms`)."""
    return BM25_HALF_RELEVANCE * float((max(scored_terms(query), 1) / BM25_HALF_TERMS) ** BM25_HALF_EXPONENT)


def scored_terms(query: LexicalQuery) -> int:
    """The words of `query`'s text (each once, or as often as written with `weigh_repeats`) and phrases."""
    words = query.text.split()
    return (len(words) if query.weigh_repeats else len(set(words))) + sum(len(p.split()) for p in query.phrases)


def readable_relevance(
    hits: Iterable[FusedHit],
    *,
    legs: Sequence[str],
    weights: Mapping[str, float] | None = None,
    bm25_half: float = BM25_HALF_RELEVANCE,
) -> Iterator[FusedHit]:
    """`hits` (best first) with `relevance`: a score in [0, 1] a person can read and threshold.

    The ranking scores (z-scores, RRF sums) only order one query's hits: a lone perfect match has z = 0.
    This reads each leg's *raw* similarity on an absolute scale instead, cosine clamped to [0, 1] and BM25
    squashed by `s / (s + bm25_half)` (`bm25_half_for` the query), and averages them with the fusion's
    weights (equal without) over the `legs` that answered (equal too if they all weigh 0); a leg that
    answered but missed the hit adds 0. That mean is the hit's `relevance_mean`, so the same match scores
    about the same in any query. The order stays the fusion's: `relevance` is the lowest mean of the hit
    and every hit above it (one collapsed out of the page included), so it never rises down the list and
    `min_score` cuts a prefix of the ranking.

    So a hit the fusion ranks below one of no relevance (no lexical match, a cosine of 0 or less) reads 0,
    whatever it matched: z-score and min-max fusion give a leg's last hit that leg's floor, as they give a
    chunk it missed, so a lexical match at the foot of a short lexical list is ranked by its cosine alone,
    and can fall below semantic-only hits that read 0. Its `relevance_mean` still says what it reads alone.

    Lazy: a hit's relevance depends only on the hits above it, so a search that returns ten of a hundred
    candidates computes ten (`app.retrieval.postprocess.returned_hits`). Raises `ValueError` at the call
    for a non-positive `bm25_half`.
    """
    if bm25_half <= 0:
        msg = f"bm25_half must be > 0, got {bm25_half}"
        raise ValueError(msg)
    answered = [leg for leg in dict.fromkeys(legs) if leg in _ABSOLUTE_SCALES]
    leg_weights = {leg: NEUTRAL_WEIGHT if not weights else weights.get(leg, NEUTRAL_WEIGHT) for leg in answered}
    if not math.fsum(leg_weights.values()) > 0:
        # Only the legs weighed 0 answered (`strategy: lexical` with `{"semantic": 1}`): they are what was
        # searched, so they count equally, as in a search without weights, rather than every hit reading 0.
        leg_weights = dict.fromkeys(answered, NEUTRAL_WEIGHT)
    return _readable(hits, leg_weights, bm25_half)


def _readable(hits: Iterable[FusedHit], leg_weights: Mapping[str, float], bm25_half: float) -> Iterator[FusedHit]:
    total = math.fsum(leg_weights.values())
    ceiling = 1.0
    for hit in hits:
        parts = {
            leg: _ABSOLUTE_SCALES[leg](hit.leg_scores[leg], bm25_half) if leg in hit.leg_scores else 0.0
            for leg in leg_weights
        }
        mean = math.fsum(leg_weights[leg] * part for leg, part in parts.items()) / total if total > 0 else 0.0
        ceiling = min(ceiling, mean)
        yield _with_relevance(hit, ceiling, parts, mean)


def _with_relevance(hit: FusedHit, relevance: float, parts: Mapping[str, float], mean: float) -> FusedHit:
    # `dataclasses.replace` is 3x slower, and this runs for every candidate of every search.
    return FusedHit(
        chunk=hit.chunk,
        score=hit.score,
        ranks=hit.ranks,
        leg_scores=hit.leg_scores,
        contributions=hit.contributions,
        relevance=relevance,
        relevance_parts=parts,
        relevance_mean=mean,
        rerank_score=hit.rerank_score,
    )


def _cosine_relevance(cosine: float, _bm25_half: float) -> float:
    return min(1.0, max(0.0, cosine))  # an opposite direction is no more relevant than an orthogonal one


def _bm25_relevance(bm25: float, bm25_half: float) -> float:
    bm25 = max(0.0, bm25)
    return bm25 / (bm25 + bm25_half)


_ABSOLUTE_SCALES: Final[Mapping[str, Callable[[float, float], float]]] = {
    SEMANTIC_LEG: _cosine_relevance,
    LEXICAL_LEG: _bm25_relevance,
}
