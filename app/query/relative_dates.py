"""Relative dates in a query ("yesterday", "last week", "3 days ago", "last Friday") and the range each means. Pure.

The moment is a parameter (`now`), never read here: the request's `as_of` or the server's clock. What is
deliberately no date (a weekday without "last", "this weekend", "4 years ago") is listed in the README,
"Dates in a query": a date read wrongly filters the evidence out.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Final

from app.domain.calendar_words import MONTHS
from app.query.calendar_arithmetic import days_after, midnight, month_start, months_before, next_month_start
from app.query.date_words import is_last_month
from app.query.vocabulary import (
    AGO_UNITS,
    COUNT_WORDS,
    MONTH_NAMES,
    PARTS_OF_DAY,
    PAST_UNITS,
    RELATIVE_DAY_WORDS,
    RELATIVE_PREFIXES,
    RELATIVE_UNITS,
    VAGUE_COUNTS,
    WEEKDAY_NAMES,
    WEEKDAYS,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

_DIGITS: Final = re.compile(r"[0-9]+")
_COUNT_EXPRESSION: Final = re.compile(r"(?P<fewest>[0-9]+)(?: to (?P<most>[0-9]+))? (?P<unit>day|week|month)s? ago")
"""A count back as `relative_positions` names it: "3 days ago", "1 week ago", "2 to 5 months ago"."""
_PAST_EXPRESSION: Final = re.compile(r"past (?P<count>[0-9]+) (?P<unit>day|week|month|year)s?")
"""A count up to today as `relative_positions` names it: "past 3 days", "past 1 year"."""


def relative_positions(words: Sequence[str], *, beside_named_date: bool = False) -> list[tuple[int, str]]:
    """Where each relative date starts, with its normalised expression, in the order the query says them.

    "last week of August 2023" is no relative date: it is the end of the period the words after it name.
    With `beside_named_date` (the query names a month or a year) a count back ("3 days ago", "the past 3 days")
    and "last Friday" or "last weekend" count from that date, not from the clock ("last Friday on 23 January,
    2022"), and are not read: the named date stands alone. Days said in words ("the day before yesterday",
    "tonight") are read either way, as "yesterday" is.
    """
    found: list[tuple[int, str]] = []
    index = 0
    while index < len(words):
        spoken = _day_phrase_at(words, index) or (
            None
            if beside_named_date
            else _count_back_at(words, index)
            or _past_count_at(words, index)
            or _last_weekday_at(words, index)
            or _last_weekend_at(words, index)
        )
        if spoken is not None:
            start, expression, index = spoken
            found.append((start, expression))
            continue
        word = words[index]
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
        index += 1
    return found


def _day_phrase_at(words: Sequence[str], index: int) -> tuple[int, str, int] | None:
    """A day said in words starting at `index`, as (start, expression, index after it), or None.

    "the day before yesterday"; "this morning", "this afternoon", "this evening", "tonight" -> "today"; "last
    night" (not "the last night of the trip"); "earlier this week" ("month", "year"): up to today.
    """
    word, following = _word(words, index), _word(words, index + 1)
    if (word, following, _word(words, index + 2)) == ("day", "before", "yesterday"):
        return (index - 1 if _word(words, index - 1) == "the" else index), "the day before yesterday", index + 3
    if word == "tonight" or (word == "this" and following in PARTS_OF_DAY):
        return index, "today", index + (1 if word == "tonight" else 2)
    if (word, following) == ("last", "night") and _word(words, index - 1) not in {"the", "at"}:
        return None if _word(words, index + 2) == "of" else (index, "last night", index + 2)
    if (word, following) == ("earlier", "this") and _word(words, index + 2) in RELATIVE_UNITS:
        return index, f"earlier this {words[index + 2]}", index + 3
    return None


def _count_back_at(words: Sequence[str], index: int) -> tuple[int, str, int] | None:
    """A count of units back starting at `index`, as (start, expression, index after it), or None.

    "3 days ago" -> "3 days ago", "a fortnight ago" -> "2 weeks ago", "a few weeks ago" -> "2 to 5 weeks ago",
    "the week before last" -> "2 weeks ago".
    """
    counted = _count_at(words, index)
    if counted is not None:
        (fewest, most), position = counted
        unit, size = AGO_UNITS.get(_word(words, position), ("", 0))
        if size and fewest > 0 and _word(words, position + 1) == "ago":
            return index, _count_expression(fewest * size, most * size, unit), position + 2
    unit = _word(words, index)
    if (
        unit in {"week", "month"}
        and words[index + 1 : index + 3] == ["before", "last"]
        and not _is_date_word(_word(words, index + 3))  # "the week before last Friday" counts from Friday
    ):
        start = index - 1 if _word(words, index - 1) == "the" else index
        return start, _count_expression(2, 2, unit), index + 3
    return None


def _past_count_at(words: Sequence[str], index: int) -> tuple[int, str, int] | None:
    """The "past 3 days" ("the last two weeks", "the previous few months") starting at `index`, or None.

    A vague count is read as the most it may mean ("the past few days": 5). Not "the last two weeks of August
    2023", the end of the named period, nor "the last 3 releases".
    """
    counted = _count_at(words, index + 1) if words[index] in {"last", "past", "previous"} else None
    if counted is None:
        return None
    (_, most), position = counted
    unit, size = PAST_UNITS.get(_word(words, position), ("", 0))
    if not size or most == 0 or _word(words, position + 1) in {"of", "ago"}:
        return None
    return index, f"past {most * size} {unit}{'' if most * size == 1 else 's'}", position + 1


def _last_weekday_at(words: Sequence[str], index: int) -> tuple[int, str, int] | None:
    """The "last Friday" ("last fri") starting at `index`, as (start, expression, index after it).

    Not "the last Friday of May".
    """
    weekday = _word(words, index + 1)
    if (
        words[index] != "last"
        or weekday not in WEEKDAYS
        or _word(words, index - 1) in {"the", "at"}
        or _word(words, index + 2) == "of"
    ):
        return None
    return index, f"last {WEEKDAY_NAMES[WEEKDAYS[weekday]]}", index + 2


def _last_weekend_at(words: Sequence[str], index: int) -> tuple[int, str, int] | None:
    """The "last weekend" ("this past weekend", "the past weekend") starting at `index`, as in `_last_weekday_at`.

    Not "the last weekend of the trip"; nor "this weekend" or "over the weekend", as often ahead as behind.
    """
    word, following = words[index], _word(words, index + 1)
    if word in {"this", "the"} and (following, _word(words, index + 2)) == ("past", "weekend"):
        return index, "last weekend", index + 3
    if (word, following) != ("last", "weekend") or _word(words, index - 1) in {"the", "at"}:
        return None
    return None if _word(words, index + 2) == "of" else (index, "last weekend", index + 2)


def _count_at(words: Sequence[str], index: int) -> tuple[tuple[int, int], int] | None:
    """The fewest and most a count starting at `index` means ("3", "three", "a couple of"), and where it ends."""
    word = _word(words, index)
    if word == "a" and _word(words, index + 1) in VAGUE_COUNTS:
        index, word = index + 1, words[index + 1]
    if word in VAGUE_COUNTS:
        return VAGUE_COUNTS[word], index + (2 if _word(words, index + 1) == "of" else 1)
    count = int(word) if _DIGITS.fullmatch(word) else COUNT_WORDS.get(word)
    return None if count is None else ((count, count), index + 1)


def _count_expression(fewest: int, most: int, unit: str) -> str:
    if fewest == most:
        return f"{fewest} {unit}{'' if fewest == 1 else 's'} ago"
    return f"{fewest} to {most} {unit}s ago"


def _word(words: Sequence[str], index: int) -> str:
    return words[index] if 0 <= index < len(words) else ""


def _is_date_word(word: str) -> bool:
    return word in RELATIVE_UNITS or word in MONTHS or word in WEEKDAYS or word in {*RELATIVE_DAY_WORDS, "weekend"}


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
    the same day of the month (`months_before`). A count back ("3 days ago", "2 to 5 weeks ago") is the day,
    the ISO week or the calendar month holding the moment that many units back, so "1 week ago" is "last week".
    """
    zone = now.tzinfo or UTC
    today = midnight(now.year, now.month, now.day, zone)
    past = _PAST_EXPRESSION.fullmatch(expression)
    if past is not None:
        return _past_range(int(past["count"]), past["unit"], today)
    counted = _COUNT_EXPRESSION.fullmatch(expression)
    if counted is None:
        return _named_range(expression, today)
    fewest, most = int(counted["fewest"]), int(counted["most"] or counted["fewest"])
    return _count_back_range(fewest, most, counted["unit"], today)


def _count_back_range(fewest: int, most: int, unit: str, today: datetime) -> tuple[datetime, datetime]:
    """From the day, ISO week or month `most` units before `today`'s to the end of the one `fewest` units before."""
    if unit == "day":
        return days_after(today, -most), days_after(today, 1 - fewest)
    if unit == "week":
        week_start = days_after(today, -today.weekday())
        return days_after(week_start, -7 * most), days_after(week_start, 7 - 7 * fewest)
    zone = today.tzinfo or UTC
    this_month = month_start(today.year, today.month, zone)
    return months_before(this_month, most, zone), months_before(this_month, fewest - 1, zone)


def _past_range(count: int, unit: str, today: datetime) -> tuple[datetime, datetime]:
    """From `count` units before `today` (that day of the month for months and years) to the end of today."""
    zone = today.tzinfo or UTC
    if unit in {"day", "week"}:
        start = days_after(today, -count * (7 if unit == "week" else 1))
    else:
        start = months_before(today, count * (12 if unit == "year" else 1), zone)
    return start, days_after(today, 1)


def _named_range(expression: str, today: datetime) -> tuple[datetime, datetime]:
    """The range of a relative date without a count: "today", "last week", "past month", "last March", ..."""
    zone = today.tzinfo or UTC
    week_start = days_after(today, -today.weekday())  # ISO weeks start on Monday
    tomorrow = days_after(today, 1)
    days = {
        "today": (today, tomorrow),
        "yesterday": (days_after(today, -1), today),
        "the day before yesterday": (days_after(today, -2), days_after(today, -1)),
        "last night": (days_after(today, -1), tomorrow),  # the evening before and the small hours of today
        "this week": (week_start, days_after(week_start, 7)),
        "last week": (days_after(week_start, -7), week_start),
        "last weekend": (days_after(week_start, -2), week_start),
        "earlier this week": (week_start, tomorrow),
        "earlier this month": (month_start(today.year, today.month, zone), tomorrow),
        "earlier this year": (month_start(today.year, 1, zone), tomorrow),
    }
    if expression in days:
        return days[expression]
    if expression.startswith("past "):
        months_back = {"month": 1, "year": 12}.get(expression.removeprefix("past "))
        start = days_after(today, -7) if months_back is None else months_before(today, months_back, zone)
        return start, days_after(today, 1)
    weekday = WEEKDAYS.get(expression.removeprefix("last "))
    if weekday is not None:
        # From its day of last week to the latest one before today, where that one is this week's.
        latest = days_after(today, -((today.weekday() - weekday - 1) % 7 + 1))
        return days_after(week_start, weekday - 7), days_after(latest, 1)
    named_month = expression.removeprefix("last ")
    if named_month in MONTHS:
        month = MONTHS[named_month]
        year = today.year if month < today.month else today.year - 1
        return month_start(year, month, zone), next_month_start(year, month, zone)
    this_month = month_start(today.year, today.month, zone)
    if expression == "this month":
        return this_month, next_month_start(today.year, today.month, zone)
    previous = (today.year - 1, 12) if today.month == 1 else (today.year, today.month - 1)
    return month_start(*previous, zone), this_month
