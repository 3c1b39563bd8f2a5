"""The optimizer's word tables: stop words, month names, relative dates and question-type indicators.

Data only; `app/query/optimizer.py` reads queries with them. Lowercase words throughout.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from app.domain.calendar_words import MONTHS
from app.domain.models import QuestionType

if TYPE_CHECKING:
    from collections.abc import Mapping

STOPWORDS: Final = frozenset({
    "a", "an", "and", "are", "as", "at", "be", "by", "can", "do", "does", "did", "for", "from", "how", "i",
    "if", "in", "into", "is", "it", "its", "me", "my", "of", "on", "or", "our", "should", "so", "that", "the",
    "their", "then", "there", "these", "this", "those", "to", "was", "we", "were", "what", "when", "where",
    "which", "who", "why", "will", "with", "you", "your",
})  # fmt: skip
"""Words dropped from the lexical text (kept when nothing else is left): they only add noise to BM25."""

NEGATION_WORDS: Final = frozenset({"not", "no", "without"})
DATE_NEGATIONS: Final = frozenset({"not", "never", "without"})
"""Right before a date (a preposition between allowed): "not 3 days ago", "not in March". Not "no" ("no yesterday"
is no English), nor before other words: "who did not come yesterday" asks about yesterday."""
DATE_EXCLUSIONS: Final = (
    ("except",), ("excepting",), ("excluding",), ("exclude",), ("other", "than"), ("apart", "from"), ("aside", "from"),
    ("anything", "but"), ("everything", "but"),
)  # fmt: skip
"""Words after which a date is left out, wherever it stands: "everything except the notes from last week"."""

MONTH_NAMES: Final = tuple(list(MONTHS)[:12])
"""The full month names, January first: how "last dec" is normalised ("last december")."""
PLAIN_MONTHS: Final = frozenset(
    {"january", "february", "april", "june", "july", "august", "september", "october", "november", "december"}
)
"""Month names that are never ordinary words; the others ("may", "march", "dec") need a date context."""
DATE_PREPOSITIONS: Final = frozenset(
    {"in", "during", "since", "of", "until", "till", "before", "after", "early", "late", "mid"}
)
MONTH_DAY_LEADS: Final = DATE_PREPOSITIONS | {"on", "by", "from", "between"}
"""Before a month and a plain day, they make a month that is an ordinary word too a date ("on May 3", "by dec 1"):
no modal or verb follows them. Not "to" nor "and": "want to march 14 miles", "and may 3 replicas be enough"."""
DAY_MONTH_LEADS: Final = frozenset({"on", "since", "until", "till", "before", "after"})
"""Before a plain day and such a month, they make it a date ("on 3 May", "since 3 May"). Fewer than before a month
first: a number after "of", "between", "from" or "by" is often a count a modal follows ("one of 3 may fail")."""
DATES_BEFORE_WORDS: Final = frozenset({"before", "until", "till"})
"""Before a query's one date: what happened up to it (the named day, month or year itself included)."""
DATES_AFTER_WORDS: Final = frozenset({"after", "since"})
"""Before a query's one date: what happened from it on (the named day, month or year itself included)."""

SPAN_OPENING_WORDS: Final = DATES_AFTER_WORDS | {"from", "between"}
SPAN_CLOSING_WORDS: Final = DATES_BEFORE_WORDS | {"to", "through", "and"}
"""One before one of a query's dates and one before another: it asks about the range between them ("since May
2024 until yesterday", "between 2021 and last year")."""

RELATIVE_DAY_WORDS: Final = frozenset({"today", "yesterday"})
RELATIVE_PREFIXES: Final = frozenset({"this", "last", "previous", "past"})
"""Before a unit: "this week"; "last"/"previous" week, the calendar one before; "past week"/"the last week", the
seven days up to today."""
RELATIVE_UNITS: Final = frozenset({"week", "month", "year"})
WEEKDAYS: Final[Mapping[str, int]] = {
    "monday": 0, "tuesday": 1, "wednesday": 2, "thursday": 3, "friday": 4, "saturday": 5, "sunday": 6,
    "mon": 0, "tue": 1, "tues": 1, "wed": 2, "weds": 2, "thu": 3, "thur": 3, "thurs": 3, "fri": 4, "sun": 6,
}  # fmt: skip
"""ISO weekday numbers, Monday 0. Read only after "last": a weekday alone may lie ahead or be a habit. Not "sat",
as often the verb ("the bench where she last sat")."""
WEEKDAY_NAMES: Final = tuple(list(WEEKDAYS)[:7])
"""The full weekday names, Monday first: how "last fri" is normalised ("last friday")."""
PARTS_OF_DAY: Final = frozenset({"morning", "afternoon", "evening"})
"""After "this": today ("this morning"); "tonight" is today too."""

COUNT_WORDS: Final[Mapping[str, int]] = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16,
    "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30,
}  # fmt: skip
"""Counts spelled out before a unit: "two weeks ago", "a month ago", "the past three days"."""
VAGUE_COUNTS: Final[Mapping[str, tuple[int, int]]] = {"couple": (1, 3), "few": (2, 5), "several": (3, 7)}
"""The fewest and most units a vague count may mean: "a couple of days ago" is one to three days back."""
AGO_UNITS: Final[Mapping[str, tuple[str, int]]] = {
    "day": ("day", 1), "days": ("day", 1), "week": ("week", 1), "weeks": ("week", 1),
    "fortnight": ("week", 2), "fortnights": ("week", 2), "month": ("month", 1), "months": ("month", 1),
}  # fmt: skip
"""Units a count before "ago" is read in, as (unit, how many of it): years are not (a fact of someone's past,
"moved here 4 years ago", is told long after it happened, so that year's range would drop the telling)."""
PAST_UNITS: Final[Mapping[str, tuple[str, int]]] = {**AGO_UNITS, "year": ("year", 1), "years": ("year", 1)}
"""Units after "the last"/"past" and a count ("the past two years"): a span up to today holds a late telling."""

PROCEDURAL_FIRST: Final = frozenset({"how", "steps", "guide", "howto", "tutorial"})
FACTUAL_FIRST: Final = frozenset({"what", "define", "when", "who", "which", "whats", "what's"})
COMPARATIVE_WORDS: Final = frozenset({"compare", "comparison", "difference", "differences", "vs", "versus"})
TROUBLESHOOTING_WORDS: Final = frozenset(
    {
        "fix", "error", "errors", "debug", "broken", "failing", "fails", "failed", "failure", "troubleshoot",
        "troubleshooting", "crash", "crashing", "crashloopbackoff", "oomkilled", "exception", "resolve",
    }
)  # fmt: skip
NAVIGATIONAL_WORDS: Final = frozenset({"where", "find", "show", "locate", "list"})
PROCEDURAL_WORDS: Final = frozenset({"steps", "guide", "tutorial", "howto", "walkthrough"})
FACTUAL_WORDS: Final = frozenset({"define", "definition", "meaning"})


FIRST_TOKEN_RULES: Final = (
    (PROCEDURAL_FIRST, QuestionType.PROCEDURAL),
    (COMPARATIVE_WORDS, QuestionType.COMPARATIVE),
    (TROUBLESHOOTING_WORDS, QuestionType.TROUBLESHOOTING),
    (NAVIGATIONAL_WORDS, QuestionType.NAVIGATIONAL),
)
ANYWHERE_RULES: Final = (  # in priority order: "resolve timeout errors" is troubleshooting
    (TROUBLESHOOTING_WORDS, QuestionType.TROUBLESHOOTING),
    (COMPARATIVE_WORDS, QuestionType.COMPARATIVE),
    (PROCEDURAL_WORDS, QuestionType.PROCEDURAL),
    (NAVIGATIONAL_WORDS, QuestionType.NAVIGATIONAL),
    (FACTUAL_WORDS, QuestionType.FACTUAL),
)
