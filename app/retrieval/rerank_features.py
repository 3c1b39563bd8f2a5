"""Features of one fused candidate for the learned second stage: both legs' evidence plus query-text matches.

Pure and deterministic. The training script (`scripts/train_reranker.py`) and the serving adapter
(`app/engines/learned_ranker.py`) both call `candidate_features`, so what a model was trained on is
exactly what it sees when serving. Scale-dependent values (BM25, fused scores) are normalised within
the query's candidates, since their raw scale differs from query to query and from engine to engine.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Final

from app.domain.models import LEXICAL_LEG, SEMANTIC_LEG

if TYPE_CHECKING:
    from collections.abc import Sequence

    from app.domain.models import FusedHit, RerankQuery

FEATURE_NAMES: Final = (
    "semantic_found",
    "lexical_found",
    "both_found",
    "semantic_reciprocal_rank",
    "lexical_reciprocal_rank",
    "semantic_log_rank",
    "lexical_log_rank",
    "semantic_cosine",
    "semantic_cosine_gap",
    "semantic_minmax",
    "lexical_ratio",
    "lexical_minmax",
    "fused_reciprocal_position",
    "fused_minmax",
    "title_term_overlap",
    "text_term_overlap",
    "phrase_match",
    "year_match",
    "number_match",
    "date_in_range",
)
"""Order of the feature vector; a model file names them and is refused when they differ."""

ABSENT_RANK: Final = 101
"""Rank given to a leg that did not return the candidate: one past the evaluation's depth per leg."""

STEM_CHARS: Final = 6
"""Words are compared by their first 6 characters, a crude stemmer ("mutations" ~ "mutation")."""

_WORD: Final = re.compile(r"[a-z0-9]+")
_YEAR: Final = re.compile(r"\b(?:19|20)\d\d\b")
_NUMBER: Final = re.compile(r"\b\d+(?:\.\d+)?\b")
_STOPWORD_TEXT: Final = (
    "a an and are as at be but by did do does for from had has have he her his how i in is it its me my of on "
    "or she so that the their them they this to was we what when where which who why will with you your"
)
_STOPWORDS: Final = frozenset(_STOPWORD_TEXT.split())


def query_stems(text: str) -> frozenset[str]:
    """The query's content words, lower-cased and cut to `STEM_CHARS` (stopwords and 1-letter words dropped)."""
    return frozenset(
        word[:STEM_CHARS] for word in _WORD.findall(text.lower()) if len(word) > 1 and word not in _STOPWORDS
    )


def _stems(text: str) -> frozenset[str]:
    return frozenset(word[:STEM_CHARS] for word in _WORD.findall(text.lower()))


def _minmax(values: Sequence[float | None]) -> list[float]:
    present = [value for value in values if value is not None]
    if not present:
        return [0.0] * len(values)
    low, high = min(present), max(present)
    span = high - low
    return [0.0 if value is None else (1.0 if span == 0 else (value - low) / span) for value in values]


def _overlap(wanted: frozenset[str], found: frozenset[str]) -> float:
    return len(wanted & found) / len(wanted) if wanted else 0.0


def candidate_features(query: RerankQuery, candidates: Sequence[FusedHit]) -> list[list[float]]:
    """One feature vector (`FEATURE_NAMES` order) per candidate, in the candidates' order."""
    stems = query_stems(query.text)
    years = frozenset(_YEAR.findall(query.text))
    numbers = frozenset(_NUMBER.findall(query.text)) - years
    phrases = tuple(phrase.lower() for phrase in query.phrases)
    cosines = [hit.leg_scores.get(SEMANTIC_LEG) for hit in candidates]
    bm25s = [hit.leg_scores.get(LEXICAL_LEG) for hit in candidates]
    top_cosine = max((value for value in cosines if value is not None), default=0.0)
    top_bm25 = max((value for value in bm25s if value is not None), default=0.0)
    semantic_minmax, lexical_minmax = _minmax(cosines), _minmax(bm25s)
    fused_minmax = _minmax([hit.score for hit in candidates])
    rows: list[list[float]] = []
    for position, hit in enumerate(candidates):
        chunk = hit.chunk
        semantic_rank = hit.ranks.get(SEMANTIC_LEG)
        lexical_rank = hit.ranks.get(LEXICAL_LEG)
        cosine, bm25 = cosines[position], bm25s[position]
        text = chunk.text.lower()
        title_stems = _stems(" ".join((*chunk.breadcrumb, chunk.section_title)))
        text_years = frozenset(_YEAR.findall(text))
        if chunk.event_time is not None:
            text_years |= {str(chunk.event_time.year)}
        in_range = _date_in_range(query, hit)
        rows.append(
            [
                float(semantic_rank is not None),
                float(lexical_rank is not None),
                float(semantic_rank is not None and lexical_rank is not None),
                1.0 / semantic_rank if semantic_rank else 0.0,
                1.0 / lexical_rank if lexical_rank else 0.0,
                math.log(semantic_rank or ABSENT_RANK),
                math.log(lexical_rank or ABSENT_RANK),
                cosine if cosine is not None else 0.0,
                top_cosine - cosine if cosine is not None else 1.0,
                semantic_minmax[position],
                bm25 / top_bm25 if bm25 is not None and top_bm25 > 0 else 0.0,
                lexical_minmax[position],
                1.0 / (position + 1),
                fused_minmax[position],
                _overlap(stems, title_stems),
                _overlap(stems, _stems(text)),
                float(any(phrase in text for phrase in phrases)),
                _overlap(years, text_years),
                _overlap(numbers, frozenset(_NUMBER.findall(text))),
                in_range,
            ]
        )
    return rows


def _date_in_range(query: RerankQuery, hit: FusedHit) -> float:
    """1 when the query names a date range and the chunk's event time lies in it, -1 outside, 0 otherwise."""
    moment = hit.chunk.event_time
    if moment is None or (query.event_time_from is None and query.event_time_to is None):
        return 0.0
    after_start = query.event_time_from is None or moment >= query.event_time_from
    before_end = query.event_time_to is None or moment < query.event_time_to
    return 1.0 if after_start and before_end else -1.0
