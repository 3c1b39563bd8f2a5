"""Evidence boosts over a fused ranking: who said or is named in a hit, whether it carries a date, how recent.

Pure functions; the one piece of state is a bounded memo of which texts carry a date (`mentions_date_kept`).

Applied after fusion (`HybridSearcher`), before collapsing: each boost is added to the hit's fusion score
as a contribution of its own (`entity`, `mention`, `date`, `recency`), so `score` stays the sum of
`contributions` and the response's per-leg contributions are unchanged. Hits are then re-ordered, tied ones
kept in the order fusion gave them.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import TYPE_CHECKING, Final

from app.domain.ascii_folding import fold_to_ascii
from app.domain.calendar_words import MONTHS, without_dated_months
from app.retrieval.fusion import best_first, with_contributions

if TYPE_CHECKING:
    from collections.abc import Sequence

    from app.domain.models import Chunk, FusedHit
    from app.domain.reordering import EvidencePreferences

ENTITY_CONTRIBUTION: Final = "entity"
MENTION_CONTRIBUTION: Final = "mention"
DATE_CONTRIBUTION: Final = "date"
RECENCY_CONTRIBUTION: Final = "recency"

_MONTH_NAMES: Final = "|".join(MONTHS)
_WEEKDAYS: Final = "monday|tuesday|wednesday|thursday|friday|saturday|sunday"
_UNITS: Final = "day|days|week|weeks|weekend|weekends|month|months|year|years|night|summer|winter|spring|fall|autumn"
DATE_MENTION: Final = re.compile(
    rf"\b(?:yesterday|today|tonight|tomorrow|ago|recently|lately"
    rf"|(?:last|next|this|past|coming|previous|few)\s+(?:{_UNITS}|{_WEEKDAYS})"
    rf"|(?:{_WEEKDAYS})"
    rf"|(?:{_MONTH_NAMES})\s+\d{{1,2}}\b|\d{{1,2}}\s+(?:{_MONTH_NAMES})\b|in\s+(?:{_MONTH_NAMES})"
    rf"|(?:19|20)\d\d)\b"
)
"""A date or a relative date in a *lowercased* text: what an answer to a *when* question usually carries.

Case-sensitive on purpose: `re.IGNORECASE` made every search about 2.5 times slower (160 against 66 us per
SciFact abstract), and a when-question reads it over each of its 100 candidates.
"""


def mentions_date(text: str) -> bool:
    """Whether `text` carries a date, a weekday or a relative date ("yesterday", "last week", "3 years ago")."""
    return DATE_MENTION.search(text.lower()) is not None


DATED_TEXTS_KEPT: Final = 16_384
"""Texts whose `mentions_date` answer is kept, by the text's hash (under 2 MB); when full, all are forgotten."""
_dated_by_text_hash: dict[int, bool] = {}


def mentions_date_kept(text: str) -> bool:
    """`mentions_date(text)`, read once per distinct text and kept (by its 64-bit hash, not the text itself).

    A when-question reads it over every candidate, and the same chunks come back question after question:
    on abstracts of ~1,400 characters the pattern costs ~55 us a text, 5 ms for a question's 100, where
    hashing the text costs ~1 us. Two texts would share an answer only if their hashes collided.
    """
    key = hash(text)
    dated = _dated_by_text_hash.get(key)
    if dated is None:
        dated = mentions_date(text)
        if len(_dated_by_text_hash) >= DATED_TEXTS_KEPT:
            _dated_by_text_hash.clear()  # one atomic call: safe beside another thread, unlike evicting one by one
        _dated_by_text_hash[key] = dated
    return dated


def names_in(text: str, names: Sequence[str]) -> bool:
    """Whether any of `names` occurs in `text` as a whole word, in any case, with or without its accents.

    `names` as the query reader gives them: lowercase, folded to ASCII. A name that is a month's (a speaker May) is
    not matched where a day of the month or a year beside it dates it (`without_dated_months`): every LoCoMo-style
    title "1:56 pm on 8 May, 2023 | Caroline" would name her.
    """
    if not names:
        return False
    folded = fold_to_ascii(text.lower())
    if not MONTHS.keys().isdisjoint(names):
        folded = without_dated_months(folded)
    return _names_pattern(tuple(names)).search(folded) is not None


@lru_cache(maxsize=1024)
def _names_pattern(names: tuple[str, ...]) -> re.Pattern[str]:
    # One pattern per query's names, compiled once: the boost reads it over every candidate of the query.
    return re.compile(rf"\b(?:{'|'.join(re.escape(name) for name in names)})\b")


def prefer_evidence(hits: Sequence[FusedHit], preferences: EvidencePreferences) -> list[FusedHit]:
    """`hits` with the boosts `preferences` asks for added to their scores, re-ordered best first.

    A hit gains `entity_boost` when its breadcrumb (title: who said a turn) names one of `names`,
    `mention_boost` when its text does, `date_boost` (when `prefer_dated`) when its text carries a date,
    and up to `recency_boost` (when `prefer_recent`) by its event time's rank among the dated hits: the
    newest gains all of it, the oldest none, undated hits none. Unchanged order when nothing applies.
    """
    if not preferences.changes_ranking:
        return list(hits)
    recency = _recency_shares(hits) if preferences.prefer_recent and preferences.recency_boost > 0 else {}
    boosted = []
    for hit in hits:
        extra = _boosts(hit.chunk, preferences)
        if hit.chunk_id in recency:
            extra[RECENCY_CONTRIBUTION] = preferences.recency_boost * recency[hit.chunk_id]
        if not extra:
            boosted.append(hit)
            continue
        boosted.append(with_contributions(hit, extra))
    return best_first(boosted)


def _boosts(chunk: Chunk, preferences: EvidencePreferences) -> dict[str, float]:
    extra: dict[str, float] = {}
    if preferences.names:
        if preferences.entity_boost > 0 and names_in(" ".join(chunk.breadcrumb), preferences.names):
            extra[ENTITY_CONTRIBUTION] = preferences.entity_boost
        if preferences.mention_boost > 0 and names_in(chunk.text, preferences.names):
            extra[MENTION_CONTRIBUTION] = preferences.mention_boost
    if preferences.prefer_dated and preferences.date_boost > 0 and mentions_date_kept(chunk.text):
        extra[DATE_CONTRIBUTION] = preferences.date_boost
    return extra


def _recency_shares(hits: Sequence[FusedHit]) -> dict[str, float]:
    """Chunk id -> share in [0, 1] of the recency boost: the dated hits' event times ranked, newest 1."""
    times = sorted({hit.chunk.event_time for hit in hits if hit.chunk.event_time is not None})
    if not times:
        return {}
    place = {moment: (index / (len(times) - 1) if len(times) > 1 else 1.0) for index, moment in enumerate(times)}
    return {hit.chunk_id: place[hit.chunk.event_time] for hit in hits if hit.chunk.event_time is not None}
