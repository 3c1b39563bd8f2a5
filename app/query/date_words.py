"""Which words of a query are dates by themselves: years, days of the month, "last" and a month. Pure."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

from app.query.vocabulary import MONTHS

if TYPE_CHECKING:
    from collections.abc import Sequence

MIN_YEAR: Final = 2000
MAX_YEAR: Final = 2100
DAY_OF_MONTH: Final = re.compile(r"(?:0?[1-9]|[12]\d|3[01])(?:st|nd|rd|th)?")
ORDINAL_DAY: Final = re.compile(r"(?:0?[1-9]|[12]\d|3[01])(?:st|nd|rd|th)")


def is_year(word: str) -> bool:
    """Whether a word is a four-digit year the service reads as a date (2000-2100)."""
    return len(word) == 4 and word.isdigit() and MIN_YEAR <= int(word) <= MAX_YEAR  # noqa: PLR2004 - YYYY


def is_last_month(words: Sequence[str], index: int) -> bool:
    """Whether the month at `index` is "last March": relative, its latest occurrence before the current month.

    Not "the last march of the parade" or "at last may ...", nor "last December 2022", which its year dates.
    """
    following, after_following = [*words[index + 1 : index + 3], "", ""][:2]
    dated_by_year = is_year(following) or bool(DAY_OF_MONTH.fullmatch(following) and is_year(after_following))
    return (
        index > 0
        and words[index - 1] == "last"
        and (index == 1 or words[index - 2] not in {"the", "at"})  # "at last may the builds pass"
        and words[index] in MONTHS
        and not dated_by_year
    )
