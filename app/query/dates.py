"""Dates in a query: years, month names, relative expressions, and the event-time range they describe. Pure.

Relative expressions and their ranges are read in `app/query/relative_dates.py`. The clock is a parameter
(`now`), never read here, so a relative date resolves against whichever moment the caller means: the request's
time today, a memory's own clock for temporal questions.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Final

from app.domain.calendar_words import DAY_OF_MONTH, MONTHS, ORDINAL_DAY, has_day_of_month_beside, is_year
from app.domain.moments import as_utc
from app.query.calendar_arithmetic import days_after, midnight, month_start, next_month_start
from app.query.date_words import is_last_month
from app.query.relative_dates import relative_positions, relative_range
from app.query.vocabulary import (
    DATE_EXCLUSIONS,
    DATE_NEGATIONS,
    DATE_PREPOSITIONS,
    DATES_AFTER_WORDS,
    DATES_BEFORE_WORDS,
    DAY_MONTH_LEADS,
    MONTH_DAY_LEADS,
    PLAIN_MONTHS,
    SPAN_CLOSING_WORDS,
    SPAN_OPENING_WORDS,
)

if TYPE_CHECKING:
    from collections.abc import Collection, Sequence


class DateDirection(StrEnum):
    """Which side of a query's one date it asks about ("before April 2024", "since June")."""

    BEFORE = "before"
    AFTER = "after"


class DateSpan(StrEnum):
    """The kinds of date a query's range runs between: from a month or year to a relative date, or back."""

    ABSOLUTE_TO_RELATIVE = "absolute_to_relative"
    RELATIVE_TO_ABSOLUTE = "relative_to_absolute"


_BEFORE_A_NEGATED_DATE: Final = DATE_PREPOSITIONS | SPAN_OPENING_WORDS | {"on", "at", "for"}
"""Words that may stand between a negation and its date: "not in March", "not since last Friday"."""


def without_negated_dates(words: Sequence[str], *, capitalised_at: Collection[int] = ()) -> list[str]:
    """`words` with every word from a negated date on blanked (""), so no date is read there.

    A date is negated after an exclusion ("anything except yesterday", "everything except the notes from last
    week") or right after "not", "never", "without" or a "-n't" word, prepositions between ("not 3 days ago",
    "not in March"). Reading it as a range would keep only what was asked to be left out, and the words of a
    negated date do not say what is wanted instead, so the query reads no date from there on: dates said
    before it stand ("in March 2025, not last week" is March). "who did not come yesterday" negates the verb.
    `capitalised_at`: as `months_named` reads it.
    """
    cut = len(words)
    for index in range(len(words)):
        if any(tuple(words[index : index + len(exclusion)]) == exclusion for exclusion in DATE_EXCLUSIONS):
            cut = index
            break
    starts = set(_date_starts(words[:cut], capitalised_at))
    for index, word in enumerate(words[:cut]):
        if word in DATE_NEGATIONS or word.endswith("n't"):
            following = index + 1
            while following < cut and words[following] in _BEFORE_A_NEGATED_DATE:
                following += 1
            if following in starts:
                cut = index
                break
    return [*words[:cut], *("" for _ in words[cut:])]


def months_named(words: Sequence[str], *, capitalised_at: Collection[int] = ()) -> tuple[int, ...]:
    """Month numbers named in the query. Ambiguous names ("may", "march", "dec") need a date beside them.

    `capitalised_at`: where the query writes a month name with a capital that says something
    (`app/domain/capitals.py`: inside a sentence, in a query not in Title Case): a plain day beside it dates it there
    (`is_dated_by_day`: "What did Caroline do May 3?").
    """
    return tuple(dict.fromkeys(MONTHS[words[index]] for index in _month_positions(words, capitalised_at)))


def _month_positions(words: Sequence[str], capitalised_at: Collection[int]) -> list[int]:
    """Where the query names a month: a plain month name, or an ambiguous one ("may", "march") dated by its neighbours.

    Dated as `is_dated_by_context` says. A bare number alone does not date it: "may 3 replicas be enough" and
    "we march 5 miles" are no dates. "last March" is a relative date (`is_last_month`), not one of these.
    """
    return [
        index
        for index, word in enumerate(words)
        if word in MONTHS
        and (word in PLAIN_MONTHS or is_dated_by_context(words, index, capitalised=index in capitalised_at))
        and not is_last_month(words, index)
    ]


def is_dated_by_context(words: Sequence[str], index: int, *, capitalised: bool = False) -> bool:
    """Whether the month name at `index` is a date by its neighbours alone, as an ambiguous one ("may") must be.

    After a preposition ("in may"), before a year ("may 2024"), beside an ordinal ("aug 15th", "4th october"),
    or beside a plain day of the month as `is_dated_by_day` says ("on may 3", "may 3, 2023").
    """
    following = words[index + 1] if index + 1 < len(words) else ""
    previous = words[index - 1] if index > 0 else ""
    return (
        previous in DATE_PREPOSITIONS
        or is_year(following)
        or bool(ORDINAL_DAY.fullmatch(following) or ORDINAL_DAY.fullmatch(previous))
        or is_dated_by_day(words, index, capitalised=capitalised)
    )


def is_dated_by_day(words: Sequence[str], index: int, *, capitalised: bool) -> bool:
    """Whether a plain day of the month beside the month name at `index` ("may 3", "3 may") makes it a date.

    A day alone does not where the name is an ordinary word too: "may 3 people come", "we march 14 miles". It does
    after a word that opens a date (`MONTH_DAY_LEADS`: "on May 3", "by dec 1"; `DAY_MONTH_LEADS`: "on 3 May"),
    before a year ("may 3, 2023"), or where the name is `capitalised` inside a sentence, as neither the modal nor the
    verb is written there (`has_day_of_month_beside`, as titles and turns are read): "What did Caroline do May 3?"
    is May and names no one May. A capital opening a sentence or in a Title Case query says nothing: "May 3 people
    come?", "How May 3 Replicas Fail" are no dates. A number a unit follows is a count, not a day: "What did Caroline
    tell May 3 days ago?".
    """
    if capitalised:
        return has_day_of_month_beside(words, index)
    previous = words[index - 1] if index > 0 else ""
    following, after_following = [*words[index + 1 : index + 3], "", ""][:2]
    if DAY_OF_MONTH.fullmatch(following) and (previous in MONTH_DAY_LEADS or is_year(after_following)):
        return True
    return bool(DAY_OF_MONTH.fullmatch(previous)) and index > 1 and words[index - 2] in DAY_MONTH_LEADS


def is_month_named_by_date(words: Sequence[str], index: int) -> bool:
    """Whether the word at `index`, a month's name that is someone's too (a speaker May or June), is the month there.

    Where its neighbours date it as they date an ambiguous month (`is_dated_by_context`: "in May", "since May
    2024"), after "last" ("last May", `is_last_month`), beside a day of the month ("June 3", "on 3 June": read as
    written capitalised, as a name is, `is_dated_by_day`), after "between", or closing a range a date opens
    ("between June and August", "from May 2024 to August"): said of someone, a month's name stands by none of them
    ("What did June and August do?"). Not a month's name: False.
    """
    if words[index] not in MONTHS:
        return False
    previous = words[index - 1] if index > 0 else ""
    opened_by_date = (
        previous in SPAN_CLOSING_WORDS
        and index > 1
        and (is_year(words[index - 2]) or is_month_named_by_date(words, index - 2))
    )
    return (
        is_dated_by_context(words, index, capitalised=True)
        or is_last_month(words, index)
        or previous == "between"
        or opened_by_date
    )


def date_direction(words: Sequence[str], *, capitalised_at: Collection[int] = ()) -> DateDirection | None:
    """The side of the query's date it asks about: "before April 2024", "until 2023", "since last week".

    Read from the word just before the first date ("before the 10th of May" has none); a query naming
    several dates ("from March to June", "since May 2024 until yesterday") asks about the span between
    them, not a side. A negated one ("not before April") is no date (`without_negated_dates`). `capitalised_at`: as
    `months_named` reads it.
    """
    months = _month_positions(words, capitalised_at)
    relative = [index for index, _ in _relative_positions(words, capitalised_at)]
    if len(relative) > 1 or (relative and (months or _distinct_years(words))):
        return None
    starts = _date_starts(words, capitalised_at)
    if not starts or len({MONTHS[words[index]] for index in months}) > 1 or len(_distinct_years(words)) > 1:
        return None
    first = min(starts)
    previous = words[first - 1] if first > 0 else ""
    if previous in DATES_BEFORE_WORDS or (previous == "to" and first > 1 and words[first - 2] == "prior"):
        return DateDirection.BEFORE
    if previous in DATES_AFTER_WORDS:
        return DateDirection.AFTER
    return None


def date_span(words: Sequence[str], *, capitalised_at: Collection[int] = ()) -> DateSpan | None:
    """Which kind of date a query's range runs from and to: "since May 2024 until yesterday" is absolute to relative.

    One date follows a word that opens a range ("since", "from", "between") and another one a word that
    closes it ("until", "to", "and"). None when there is no such pair, or both dates are of one kind (the
    range of several months, years or relative dates is already their span). `capitalised_at`: as `months_named`.
    """
    relative = {index for index, _ in _relative_positions(words, capitalised_at)}
    starts = _date_starts(words, capitalised_at)
    opening = {start in relative for start in starts if start > 0 and words[start - 1] in SPAN_OPENING_WORDS}
    closing = {start in relative for start in starts if start > 0 and words[start - 1] in SPAN_CLOSING_WORDS}
    if opening == {False} and closing == {True}:
        return DateSpan.ABSOLUTE_TO_RELATIVE
    if opening == {True} and closing == {False}:
        return DateSpan.RELATIVE_TO_ABSOLUTE
    return None


def _date_starts(words: Sequence[str], capitalised_at: Collection[int]) -> list[int]:
    """Where each date of the query starts: a month (or the day before it), a year, a relative date."""
    return [
        *(
            index - 1 if index > 0 and DAY_OF_MONTH.fullmatch(words[index - 1]) else index
            for index in _month_positions(words, capitalised_at)
        ),
        *(index for index, word in enumerate(words) if is_year(word)),
        *(index for index, _ in _relative_positions(words, capitalised_at)),
    ]


def _distinct_years(words: Sequence[str]) -> set[str]:
    return {word for word in words if is_year(word)}


def _relative_positions(words: Sequence[str], capitalised_at: Collection[int]) -> list[tuple[int, str]]:
    """The relative dates of `relative_positions`; a count back beside a named month or year counts from it."""
    named = bool(_month_positions(words, capitalised_at) or _distinct_years(words))
    return relative_positions(words, beside_named_date=named)


def relative_dates_named(words: Sequence[str], *, capitalised_at: Collection[int] = ()) -> tuple[str, ...]:
    """Relative date expressions, normalised: "today", "yesterday", "this week", "last month", ..."""
    return tuple(dict.fromkeys(expression for _, expression in _relative_positions(words, capitalised_at)))


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
    if direction is None and not years and not months and tuple(relative_dates) == ("last year",):
        return _last_year_and_its_telling(now)
    start, end = _dates_range(years=years, months=months, relative_dates=relative_dates, now=now, span=span)
    if start is None or end is None or direction is None:
        return start, end
    return (None, end) if direction is DateDirection.BEFORE else (start, None)


def _last_year_and_its_telling(now: datetime) -> tuple[datetime, datetime]:
    """The "last year" alone: from its first day to the end of today, in `now`'s time zone.

    A thing of last year is often told this year, and the year alone would drop the telling: each of LoCoMo's
    six "last year" questions ("our camping trip last year", said in July 2023) is answered by a turn of the
    year after. Beside a month, a side or another date it is the calendar year ("december last year").
    """
    zone = now.tzinfo or UTC
    today = midnight(now.year, now.month, now.day, zone)
    return as_utc(month_start(now.year - 1, 1, zone)), as_utc(days_after(today, 1))


def _dates_range(
    *, years: Sequence[int], months: Sequence[int], relative_dates: Sequence[str], now: datetime, span: DateSpan | None
) -> tuple[datetime | None, datetime | None]:
    zone = now.tzinfo or UTC
    relative_years = {"this year": now.year, "last year": now.year - 1}
    all_years = [*years, *(relative_years[expression] for expression in relative_dates if expression in relative_years)]
    absolute: tuple[datetime, datetime] | None = None
    if months and all_years:
        absolute = (
            month_start(min(all_years), min(months), zone),
            next_month_start(max(all_years), max(months), zone),
        )
    elif months:
        occurrences = [(now.year if month <= now.month else now.year - 1, month) for month in months]
        absolute = (month_start(*min(occurrences), zone), next_month_start(*max(occurrences), zone))
    elif all_years:
        absolute = (month_start(min(all_years), 1, zone), month_start(max(all_years) + 1, 1, zone))
    relative_ranges = [
        relative_range(expression, now) for expression in relative_dates if expression not in relative_years
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
