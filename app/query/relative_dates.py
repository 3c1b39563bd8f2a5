"""Relative dates in a query ("yesterday", "last week", "last March") and the range each means at a moment. Pure.

The moment is a parameter (`now`), never read here: the request's `as_of` or the server's clock.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from app.query.calendar_arithmetic import days_after, midnight, month_start, months_before, next_month_start
from app.query.date_words import is_last_month
from app.query.vocabulary import MONTH_NAMES, MONTHS, RELATIVE_DAY_WORDS, RELATIVE_PREFIXES, RELATIVE_UNITS

if TYPE_CHECKING:
    from collections.abc import Sequence


def relative_positions(words: Sequence[str]) -> list[tuple[int, str]]:
    """Where each relative date starts, with its normalised expression, in the order the query says them.

    "last week of August 2023" is no relative date: it is the end of the period the words after it name.
    """
    found: list[tuple[int, str]] = []
    for index, word in enumerate(words):
        if word in RELATIVE_DAY_WORDS:
            found.append((index, word))
        elif index + 1 < len(words) and is_last_month(words, index + 1):
            found.append((index, f"last {MONTH_NAMES[MONTHS[words[index + 1]] - 1]}"))
        elif (
            word in RELATIVE_PREFIXES
            and index + 1 < len(words)
            and words[index + 1] in RELATIVE_UNITS
            and tuple(words[index + 2 : index + 3]) != ("of",)
        ):
            found.append((index, f"{_relative_prefix(words, index)} {words[index + 1]}"))
    return found


def _relative_prefix(words: Sequence[str], index: int) -> str:
    """How the prefix at `index` is normalised: "this"; "past" (also "the last": "in the last year"); "last"."""
    word = words[index]
    if word == "this":
        return "this"
    if word == "past" or (word == "last" and index > 0 and words[index - 1] == "the"):
        return "past"
    return "last"


def relative_range(expression: str, now: datetime) -> tuple[datetime, datetime]:
    """The `[from, to)` range of one relative day/week/month expression, in `now`'s own time zone.

    "last March" is the latest March before the current month: asked in March 2025, March 2024. "past week"
    ("the last week") runs from that weekday a week ago to the end of today; "past month" and "past year" from
    the same day of the month (`months_before`).
    """
    zone = now.tzinfo or UTC
    today = midnight(now.year, now.month, now.day, zone)
    week_start = days_after(today, -today.weekday())  # ISO weeks start on Monday
    days = {
        "today": (today, days_after(today, 1)),
        "yesterday": (days_after(today, -1), today),
        "this week": (week_start, days_after(week_start, 7)),
        "last week": (days_after(week_start, -7), week_start),
    }
    if expression in days:
        return days[expression]
    if expression.startswith("past "):
        months_back = {"month": 1, "year": 12}.get(expression.removeprefix("past "))
        start = days_after(today, -7) if months_back is None else months_before(today, months_back, zone)
        return start, days_after(today, 1)
    named_month = expression.removeprefix("last ")
    if named_month in MONTHS:
        month = MONTHS[named_month]
        year = now.year if month < now.month else now.year - 1
        return month_start(year, month, zone), next_month_start(year, month, zone)
    this_month = month_start(now.year, now.month, zone)
    if expression == "this month":
        return this_month, next_month_start(now.year, now.month, zone)
    previous = (now.year - 1, 12) if now.month == 1 else (now.year, now.month - 1)
    return month_start(*previous, zone), this_month
