"""Words and numbers that name a calendar date in any text: month names, days of the month, years. Pure.

Shared by the query reader (`app/query/dates.py`) and the evidence boosts (`app/retrieval/evidence.py`), which must
agree on what dates a month: a month a text dates is no one's name there.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

MONTHS: Final[Mapping[str, int]] = {
    "january": 1, "february": 2, "march": 3, "april": 4, "may": 5, "june": 6, "july": 7,
    "august": 8, "september": 9, "october": 10, "november": 11, "december": 12,
    "jan": 1, "feb": 2, "mar": 3, "apr": 4, "jun": 6, "jul": 7, "aug": 8, "sep": 9, "sept": 9,
    "oct": 10, "nov": 11, "dec": 12,
}  # fmt: skip
"""Month names and their short forms, lowercase, to the month's number (January 1)."""

MIN_YEAR: Final = 2000
MAX_YEAR: Final = 2100
DAY_OF_MONTH: Final = re.compile(r"(?:0?[1-9]|[12]\d|3[01])(?:st|nd|rd|th)?")
ORDINAL_DAY: Final = re.compile(r"(?:0?[1-9]|[12]\d|3[01])(?:st|nd|rd|th)")


def is_year(word: str) -> bool:
    """Whether a word is a four-digit year the service reads as a date (2000-2100)."""
    return len(word) == 4 and word.isdigit() and MIN_YEAR <= int(word) <= MAX_YEAR  # noqa: PLR2004 - YYYY


COUNTED_UNITS: Final = frozenset({"day", "days", "week", "weeks", "month", "months", "year", "years", "times"})
"""After a number, they make it a count, not a day of the month: "told May 3 days ago", "saw March 2 times"."""
_WORD_OR_NUMBER: Final = re.compile(r"\w[\w'\u2019.-]*")
_POSSESSIVE_OR_STOP: Final = re.compile(r"(?:['\u2019]s?)?\.*$")


def has_day_of_month_beside(words: Sequence[str], index: int) -> bool:
    """Whether a day of the month ("3", "3rd") stands right after or before the word at `index` ("May 3", "3 May").

    `words` lowercase. A number a unit of time or "times" follows is a count, not a day: "May 3 days ago".
    """
    following, after_following = [*words[index + 1 : index + 3], "", ""][:2]
    previous = words[index - 1] if index > 0 else ""
    return bool(DAY_OF_MONTH.fullmatch(following) and after_following not in COUNTED_UNITS) or bool(
        DAY_OF_MONTH.fullmatch(previous)
    )


def is_month_dated_by_number(words: Sequence[str], index: int) -> bool:
    """Whether the word at `index` of `words` (lowercase) is a month name a day of the month or a year beside dates.

    "8 may, 2023", "may 8", "may 2023", "8th may": how titles and turns write a date. Such a month is the month,
    whoever is named like it (a speaker May).
    """
    following = words[index + 1] if index + 1 < len(words) else ""
    return words[index] in MONTHS and (has_day_of_month_beside(words, index) or is_year(following))


def without_dated_months(text: str) -> str:
    """`text` with each month name that `is_month_dated_by_number` says is dated there replaced by a space."""
    found = list(_WORD_OR_NUMBER.finditer(text))
    words = [_POSSESSIVE_OR_STOP.sub("", match.group()).lower() for match in found]
    dated = [match.span() for index, match in enumerate(found) if is_month_dated_by_number(words, index)]
    for start, end in reversed(dated):
        text = f"{text[:start]} {text[end:]}"
    return text
