"""Years said relative to the clock ("last year", "two years ago", "the year before last") and their telling.

A thing of a past year is often told in a later one: each of LoCoMo's six "last year" questions is answered by
a turn of the year after it. The clock is Wednesday 2025-03-12 15:30 UTC.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.unit.test_query_relative_dates import read_range, utc

if TYPE_CHECKING:
    from datetime import datetime


@pytest.mark.parametrize(
    "query",
    [
        # LoCoMo conv-26:q118, asked in October 2023, answered by a turn of July 2023: "our camping trip last year".
        "What did Melanie and her family see during their camping trip last year?",
        "last year's goals",
    ],
)
def test_last_year_alone_runs_from_its_start_to_the_end_of_today(query: str) -> None:
    assert read_range(query) == (utc(2024, 1, 1), utc(2025, 3, 13))


@pytest.mark.parametrize(
    ("query", "start", "end"),
    [
        # Beside a month, a side or another date it is the calendar year.
        ("what did we buy in december last year", utc(2024, 12, 1), utc(2025, 1, 1)),
        ("errors since last year", utc(2024, 1, 1), None),
        ("errors before last year", None, utc(2025, 1, 1)),
        ("between 2022 and last year", utc(2022, 1, 1), utc(2025, 1, 1)),
        ("what happened this year", utc(2025, 1, 1), utc(2026, 1, 1)),
    ],
)
def test_last_year_beside_a_month_a_side_or_a_date_is_the_calendar_year(
    query: str, start: datetime | None, end: datetime | None
) -> None:
    assert read_range(query) == (start, end)


@pytest.mark.parametrize(
    "query",
    [
        # As a calendar year each would drop the telling: LoCoMo conv-49:q125 "two years ago", asked in January 2024,
        # is answered by a turn of October 2023; "the year before last" is that year.
        "How did Evan start his transformation journey two years ago?",
        "what did we do the year before last",
        "Where did Caroline move from 4 years ago?",
        "what did we ship a year ago",
    ],
)
def test_years_ago_and_the_year_before_last_are_no_dates(query: str) -> None:
    assert read_range(query) == (None, None)
