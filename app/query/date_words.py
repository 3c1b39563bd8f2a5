"""Which words of a query are dates by themselves: years, days of the month, "last" and a month. Pure."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.domain.calendar_words import DAY_OF_MONTH, MONTHS, is_year

if TYPE_CHECKING:
    from collections.abc import Sequence


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
