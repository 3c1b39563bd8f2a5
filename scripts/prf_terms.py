"""Pseudo-relevance feedback term selection (RM3-style), pure: the terms `tune_prf.py` expands a query with.

The feedback documents arrive already analyzed (the index's own analyzer: lower-cased, stop words out,
stemmed), so an expansion term is an index term and needs no second analysis. A term's weight is its
count over the feedback documents times its BM25 IDF in the searched index; the `term_count` best are
kept and their weights normalised to sum 1, so `interpolated_weights` can mix them with the original
query as RM3 does: original terms `original_weight / n` each, feedback terms `(1 - original_weight) x`
their normalised weight.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Sequence

MIN_TERM_CHARS: Final = 2  # a one-letter stem ("s", "t" of a split contraction) is noise, never a topic


def bm25_idf(document_frequency: int, document_count: int) -> float:
    """Lucene's BM25 IDF, ln(1 + (N - df + 0.5) / (df + 0.5)): never negative, 0 for an empty index."""
    if document_count <= 0:
        return 0.0
    return math.log(1 + (document_count - document_frequency + 0.5) / (document_frequency + 0.5))


def feedback_terms(
    documents: Sequence[Sequence[str]],
    *,
    document_frequency: Callable[[str], int],
    document_count: int,
    term_count: int,
    stop_terms: Collection[str] = (),
) -> list[tuple[str, float]]:
    """The `term_count` best terms of the feedback `documents` with weights summing to 1, best first.

    Weight = (occurrences over all the documents) x `bm25_idf`; numbers, `stop_terms` and terms shorter
    than `MIN_TERM_CHARS` are left out. Ties break on the term, so the selection is deterministic.
    """
    counts = Counter(
        term
        for terms in documents
        for term in terms
        if len(term) >= MIN_TERM_CHARS and not term.isdigit() and term not in stop_terms
    )
    weighted = {term: count * bm25_idf(document_frequency(term), document_count) for term, count in counts.items()}
    best = sorted(((term, weight) for term, weight in weighted.items() if weight > 0), key=lambda tw: (-tw[1], tw[0]))
    best = best[:term_count]
    total = math.fsum(weight for _, weight in best)
    return [(term, weight / total) for term, weight in best] if total > 0 else []


def interpolated_weights(
    query_terms: Sequence[str], expansion: Sequence[tuple[str, float]], *, original_weight: float
) -> tuple[float, list[tuple[str, float]]]:
    """(boost of each original term, [(feedback term, boost)]) mixing the two at `original_weight`.

    A query of n distinct terms gives each `original_weight / n`; feedback terms share the rest in
    proportion to their weights (a feedback term that is also a query term adds to it, as in RM3).
    """
    distinct = len(dict.fromkeys(query_terms))
    original_boost = original_weight / distinct if distinct else 0.0
    return original_boost, [(term, (1 - original_weight) * weight) for term, weight in expansion]
