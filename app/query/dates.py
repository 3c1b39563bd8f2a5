"""Dates in a query: years, month names, relative expressions, and the event-time range they describe. Pure.

The clock is a parameter (`now`), never read here, so a relative date resolves against whichever moment
the caller means: the request's time today, a memory's own clock for temporal questions.
"""

from __future__ import annotations

import re
from calendar import monthrange
from datetime import MAXYEAR, MINYEAR, UTC, datetime, timedelta, tzinfo
from enum import StrEnum
from typing import TYPE_CHECKING, Final

from app.domain.moments import EARLIEST, LATEST, as_utc
from app.query.vocabulary import (
    DATE_PREPOSITIONS,
    DATES_AFTER_WORDS,
    DATES_BEFORE_WORDS,
    MONTH_NAMES,
    MONTHS,
    NEGATION_WORDS,
    PLAIN_MONTHS,
    RELATIVE_DAY_WORDS,
    RELATIVE_PREFIXES,
    RELATIVE_UNITS,
    SPAN_CLOSING_WORDS,
    SPAN_OPENING_WORDS,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

MIN_YEAR: Final = 2000
MAX_YEAR: Final = 2100
_DAY_OF_MONTH: Final = re.compile(r"(?:0?[1-9]|[12]\d|3[01])(?:st|nd|rd|th)?")
_ORDINAL_DAY: Final = re.compile(r"(?:0?[1-9]|[12]\d|3[01])(?:st|nd|rd|th)")


class DateDirection(StrEnum):
    """Which side of a query's one date it asks about ("before April 2024", "since June")."""

    BEFORE = "before"
    AFTER = "after"


class DateSpan(StrEnum):
    """The kinds of date a query's range runs between: from a month or year to a relative date, or back."""

    ABSOLUTE_TO_RELATIVE = "absolute_to_relative"
    RELATIVE_TO_ABSOLUTE = "relative_to_absolute"


def is_year(word: str) -> bool:
    """Whether a word is a four-digit year the service reads as a date (2000-2100)."""
    return len(word) == 4 and word.isdigit() and MIN_YEAR <= int(word) <= MAX_YEAR  # noqa: PLR2004 - YYYY


def months_named(words: Sequence[str]) -> tuple[int, ...]:
    """Month numbers named in the query. Ambiguous names ("may", "march", "dec") need a year or a preposition."""
    return tuple(dict.fromkeys(MONTHS[words[index]] for index in _month_positions(words)))


def _month_positions(words: Sequence[str]) -> list[int]:
    """Where the query names a month: a plain month name, or an ambiguous one ("may", "march") dated by its neighbours.

    Dated: after a preposition ("in may"), before a year ("may 2024"), beside an ordinal ("aug 15th", "4th
    october"), or before a day and a year ("may 3, 2023"). A bare number alone does not date it: "may 3
    replicas be enough" and "we march 5 miles" are no dates.
    """
    positions: list[int] = []
    for index, word in enumerate(words):
        if word not in MONTHS:
            continue
        following, after_following = [*words[index + 1 : index + 3], "", ""][:2]
        previous = words[index - 1] if index > 0 else ""
        dated = (
            is_year(following)
            or bool(_ORDINAL_DAY.fullmatch(following) or _ORDINAL_DAY.fullmatch(previous))
            or bool(_DAY_OF_MONTH.fullmatch(following) and is_year(after_following))
        )
        if (word in PLAIN_MONTHS or dated or previous in DATE_PREPOSITIONS) and not _is_last_month(words, index):
            positions.append(index)
    return positions


def _is_last_month(words: Sequence[str], index: int) -> bool:
    """Whether the month at `index` is "last March": relative, its latest occurrence before the current month.

    Not "the last march of the parade" or "at last may ...", nor "last December 2022", which its year dates.
    """
    following, after_following = [*words[index + 1 : index + 3], "", ""][:2]
    dated_by_year = is_year(following) or bool(_DAY_OF_MONTH.fullmatch(following) and is_year(after_following))
    return (
        index > 0
        and words[index - 1] == "last"
        and (index == 1 or words[index - 2] not in {"the", "at"})  # "at last may the builds pass"
        and words[index] in MONTHS
        and not dated_by_year
    )


def date_direction(words: Sequence[str]) -> DateDirection | None:
    """The side of the query's date it asks about: "before April 2024", "until 2023", "since last week".

    Read from the word just before the first date ("before the 10th of May" has none); a query naming
    several dates ("from March to June", "since May 2024 until yesterday") asks about the span between
    them, not a side; nor does a negated one ("not before April").
    """
    months = _month_positions(words)
    relative = [index for index, _ in _relative_positions(words)]
    if len(relative) > 1 or (relative and (months or _distinct_years(words))):
        return None
    starts = _date_starts(words)
    if not starts or len({MONTHS[words[index]] for index in months}) > 1 or len(_distinct_years(words)) > 1:
        return None
    first = min(starts)
    previous = words[first - 1] if first > 0 else ""
    if first > 1 and words[first - 2] in NEGATION_WORDS:
        return None
    if previous in DATES_BEFORE_WORDS or (previous == "to" and first > 1 and words[first - 2] == "prior"):
        return DateDirection.BEFORE
    if previous in DATES_AFTER_WORDS:
        return DateDirection.AFTER
    return None


def date_span(words: Sequence[str]) -> DateSpan | None:
    """Which kind of date a query's range runs from and to: "since May 2024 until yesterday" is absolute to relative.

    One date follows a word that opens a range ("since", "from", "between") and another one a word that
    closes it ("until", "to", "and"). None when there is no such pair, or both dates are of one kind (the
    range of several months, years or relative dates is already their span).
    """
    relative = {index for index, _ in _relative_positions(words)}
    opening = {
        start in relative for start in _date_starts(words) if start > 0 and words[start - 1] in SPAN_OPENING_WORDS
    }
    closing = {
        start in relative for start in _date_starts(words) if start > 0 and words[start - 1] in SPAN_CLOSING_WORDS
    }
    if opening == {False} and closing == {True}:
        return DateSpan.ABSOLUTE_TO_RELATIVE
    if opening == {True} and closing == {False}:
        return DateSpan.RELATIVE_TO_ABSOLUTE
    return None


def _date_starts(words: Sequence[str]) -> list[int]:
    """Where each date of the query starts: a month (or the day before it), a year, a relative date."""
    return [
        *(
            index - 1 if index > 0 and _DAY_OF_MONTH.fullmatch(words[index - 1]) else index
            for index in _month_positions(words)
        ),
        *(index for index, word in enumerate(words) if is_year(word)),
        *(index for index, _ in _relative_positions(words)),
    ]


def _distinct_years(words: Sequence[str]) -> set[str]:
    return {word for word in words if is_year(word)}


def relative_dates_named(words: Sequence[str]) -> tuple[str, ...]:
    """Relative date expressions, normalised: "today", "yesterday", "this week", "last month", ..."""
    return tuple(dict.fromkeys(expression for _, expression in _relative_positions(words)))


def _relative_positions(words: Sequence[str]) -> list[tuple[int, str]]:
    """Where each relative date starts, with its normalised expression, in the order the query says them.

    "last week of August 2023" is no relative date: it is the end of the period the words after it name.
    """
    found: list[tuple[int, str]] = []
    for index, word in enumerate(words):
        if word in RELATIVE_DAY_WORDS:
            found.append((index, word))
        elif index + 1 < len(words) and _is_last_month(words, index + 1):
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


def _moment(year: int, month: int, day: int, zone: tzinfo) -> datetime:
    """Midnight starting that day in `zone`, or the nearest end of `datetime`'s range for a year outside it."""
    if year < MINYEAR:
        return EARLIEST
    if year > MAXYEAR:
        return LATEST
    return datetime(year, month, day, tzinfo=zone)


def _months_before(day: datetime, months: int, zone: tzinfo) -> datetime:
    """Midnight of `day`'s day of the month `months` months earlier, or that month's last day where it has none.

    A month before March 31 is February 29 (or 28), a year before February 29 is February 28.
    """
    year, month_index = divmod(day.year * 12 + day.month - 1 - months, 12)
    if year < MINYEAR:
        return EARLIEST
    return _moment(year, month_index + 1, min(day.day, monthrange(year, month_index + 1)[1]), zone)


def _month_start(year: int, month: int, zone: tzinfo) -> datetime:
    return _moment(year, month, 1, zone)


def _next_month_start(year: int, month: int, zone: tzinfo) -> datetime:
    return _month_start(year + 1, 1, zone) if month == 12 else _month_start(year, month + 1, zone)  # noqa: PLR2004


def _days_after(moment: datetime, days: int) -> datetime:
    """`moment` moved by `days` (negative: before), stopping at the ends of `datetime`'s range."""
    try:
        return moment + timedelta(days=days)
    except OverflowError:
        return EARLIEST if days < 0 else LATEST


def _relative_range(expression: str, now: datetime) -> tuple[datetime, datetime]:
    """The `[from, to)` range of one relative day/week/month expression, in `now`'s own time zone.

    "last March" is the latest March before the current month: asked in March 2025, March 2024. "past week"
    ("the last week") runs from that weekday a week ago to the end of today; "past month" and "past year" from
    the same day of the month (`_months_before`).
    """
    zone = now.tzinfo or UTC
    today = _moment(now.year, now.month, now.day, zone)
    week_start = _days_after(today, -today.weekday())  # ISO weeks start on Monday
    days = {
        "today": (today, _days_after(today, 1)),
        "yesterday": (_days_after(today, -1), today),
        "this week": (week_start, _days_after(week_start, 7)),
        "last week": (_days_after(week_start, -7), week_start),
    }
    if expression in days:
        return days[expression]
    if expression.startswith("past "):
        months_back = {"month": 1, "year": 12}.get(expression.removeprefix("past "))
        start = _days_after(today, -7) if months_back is None else _months_before(today, months_back, zone)
        return start, _days_after(today, 1)
    named_month = expression.removeprefix("last ")
    if named_month in MONTHS:
        month = MONTHS[named_month]
        year = now.year if month < now.month else now.year - 1
        return _month_start(year, month, zone), _next_month_start(year, month, zone)
    this_month = _month_start(now.year, now.month, zone)
    if expression == "this month":
        return this_month, _next_month_start(now.year, now.month, zone)
    previous = (now.year - 1, 12) if now.month == 1 else (now.year, now.month - 1)
    return _month_start(*previous, zone), this_month


def event_time_range(  # noqa: PLR0913 - each piece the query's words tell, named
    *,
    years: Sequence[int],
    months: Sequence[int],
    relative_dates: Sequence[str],
    now: datetime,
    direction: DateDirection | None = None,
    span: DateSpan | None = None,
) -> tuple[datetime | None, datetime | None]:
    """The event-time range `[from, to)` (UTC) the query's dates describe, or `(None, None)`.

    Days, weeks, months and years are those of `now`'s own time zone (a naive `now` is UTC): "today" asked
    at 08:00+09:00 is that day in Tokyo, which began at 15:00 UTC the day before. "this year"/"last year"
    act as explicit years, so "january last year" is one month. A month with no year is its most recent
    occurrence (the current month included). Several dates give the span from the earliest to the latest.
    Absolute and relative ranges intersect ("yesterday in march 2025"); when they do not overlap, their span
    is used rather than an empty range that could match nothing. With a `span` (`date_span`: the query asks
    about the range between them) the range runs from the start of the first to the end of the second:
    "since May 2024 until yesterday" is not yesterday alone. A range reaching past `datetime`'s years ends at
    its edge, and one wholly before year 1 ("last month" in January of year 1) is the empty
    `[0001-01-01, 0001-01-01)`: no dated chunk lies in it, and the planner keeps it as such rather than drop it.

    With a `direction` the range is open on one side and keeps the named period: "before April 2024" is
    up to the end of April, "since June" from the start of June, since a memory written in the month it
    names often tells of what came before or after it ("the weekend before April 10" was told on the 10th).
    """
    start, end = _dates_range(years=years, months=months, relative_dates=relative_dates, now=now, span=span)
    if start is None or end is None or direction is None:
        return start, end
    return (None, end) if direction is DateDirection.BEFORE else (start, None)


def _dates_range(
    *, years: Sequence[int], months: Sequence[int], relative_dates: Sequence[str], now: datetime, span: DateSpan | None
) -> tuple[datetime | None, datetime | None]:
    zone = now.tzinfo or UTC
    relative_years = {"this year": now.year, "last year": now.year - 1}
    all_years = [*years, *(relative_years[expression] for expression in relative_dates if expression in relative_years)]
    absolute: tuple[datetime, datetime] | None = None
    if months and all_years:
        absolute = (
            _month_start(min(all_years), min(months), zone),
            _next_month_start(max(all_years), max(months), zone),
        )
    elif months:
        occurrences = [(now.year if month <= now.month else now.year - 1, month) for month in months]
        absolute = (_month_start(*min(occurrences), zone), _next_month_start(*max(occurrences), zone))
    elif all_years:
        absolute = (_month_start(min(all_years), 1, zone), _month_start(max(all_years) + 1, 1, zone))
    relative_ranges = [
        _relative_range(expression, now) for expression in relative_dates if expression not in relative_years
    ]
    relative = (
        (min(start for start, _ in relative_ranges), max(end for _, end in relative_ranges))
        if relative_ranges
        else None
    )
    if absolute is None or relative is None:
        only = absolute or relative
        return (None, None) if only is None else (as_utc(only[0]), as_utc(only[1]))
    if span is None:
        start, end = max(absolute[0], relative[0]), min(absolute[1], relative[1])
    else:
        first, second = (absolute, relative) if span is DateSpan.ABSOLUTE_TO_RELATIVE else (relative, absolute)
        start, end = first[0], second[1]
    if start >= end:
        start, end = min(absolute[0], relative[0]), max(absolute[1], relative[1])
    return as_utc(start), as_utc(end)
