"""Words and numbers that name a calendar date in any text: month names, days of the month, years. Pure.

Shared by the query reader (`app/query/dates.py`) and the evidence boosts (`app/retrieval/evidence.py`), which must
agree on what dates a month: a month a text dates is no one's name there.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Mapping

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
