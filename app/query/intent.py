"""What a memory question is after beyond its words: a time (*when*), the latest state, and the names it holds. Pure.

Dependency-light on purpose: names are capitalised spans of the query (plus, case-insensitively, any
name the caller already knows, e.g. a project's speakers), so no model or tagger is loaded per query.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from app.query.vocabulary import MONTHS, STOPWORDS

if TYPE_CHECKING:
    from collections.abc import Collection

_APOSTROPHES: Final = "'\u2019"
_WORD: Final = re.compile(rf"[A-Za-z][\w{_APOSTROPHES}.-]*")
_POSSESSIVE: Final = re.compile(rf"(?:[{_APOSTROPHES}]s|[{_APOSTROPHES}])$")

WHEN_OPENINGS: Final = (
    ("when",),
    ("what", "date"),
    ("what", "year"),
    ("what", "month"),
    ("what", "day"),
    ("what", "time"),
    ("which", "year"),
    ("which", "month"),
    ("which", "day"),
    ("how", "long", "ago"),
)
"""Question openings that ask for a point in time (lowercase word sequences)."""
WHEN_ANYWHERE: Final = frozenset({"ago"})
"""Words that ask for a time wherever they stand ("how long ago"); not "when", which in a claim opens a
clause ("... is skewed when insulin signaling is suppressed": 20 of 1,109 SciFact claims)."""
LATEST_WORDS: Final = frozenset({"latest", "current", "currently", "recent", "recently", "now", "newest", "nowadays"})
"""Words asking for the state as it is now, not as it once was."""
NOT_NAMES: Final = frozenset({
    "what", "when", "where", "who", "whom", "whose", "why", "which", "how", "would", "could", "should", "did",
    "does", "do", "is", "are", "was", "were", "has", "have", "had", "can", "will", "might", "may", "i", "in",
    "on", "at", "after", "before", "during", "since", "the", "a", "an", "and", "or", "if", "besides", "apart",
    "other", "according", "given", "based", "considering", "both", "not", "yes", "no", "mr", "mrs", "ms", "dr",
    "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday",
})  # fmt: skip
"""Capitalised words that are question words, sentence openers, titles or calendar words, never names."""


@dataclass(frozen=True, slots=True)
class QueryIntent:
    """`asks_when`: the question wants a time; `asks_latest`: the current state; `names`: lowercase names."""

    asks_when: bool = False
    asks_latest: bool = False
    names: tuple[str, ...] = ()


def read_intent(raw_query: str, *, known_names: Collection[str] = ()) -> QueryIntent:
    """Read `raw_query`'s intent. `known_names` (lowercase) are found in any case, e.g. "what did mel say"."""
    words = [match.group() for match in _WORD.finditer(raw_query)]
    lowered = [word.lower() for word in words]
    asks_when = any(tuple(lowered[: len(opening)]) == opening for opening in WHEN_OPENINGS) or bool(
        WHEN_ANYWHERE.intersection(lowered)
    )
    asks_latest = bool(LATEST_WORDS.intersection(lowered))
    return QueryIntent(
        asks_when=asks_when, asks_latest=asks_latest, names=named_entities(words, known_names=known_names)
    )


def named_entities(words: list[str], *, known_names: Collection[str] = ()) -> tuple[str, ...]:
    """Lowercase names in `words`, first seen first.

    A name is a capitalised word that is no question word, stop word or month (a possessive `'s`
    dropped), or any word in `known_names`, whatever its case.
    """
    found: list[str] = []
    for word in words:
        bare = _POSSESSIVE.sub("", word).rstrip(".")
        lowered = bare.lower()
        if not lowered:
            continue
        capitalised = bare[0].isupper() and lowered not in NOT_NAMES and lowered not in STOPWORDS
        if lowered in known_names or (capitalised and lowered not in MONTHS):
            found.append(lowered)
    return tuple(dict.fromkeys(found))
