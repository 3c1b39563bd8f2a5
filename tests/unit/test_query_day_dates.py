"""A plain day of the month beside a month whose name is an ordinary word too ("may", "march", "aug").

Such a month needs its neighbours to date it; a plain day does where a word that opens a date stands before it
("on May 3", "on 3 May", "since Aug 15"), never alone ("may 3 people come", "we march 14 miles"). The day itself is
not read: "May 3" is May. The clock is Monday 2024-06-10 12:00 UTC, so May is May 2024 and March March 2024.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from app.query.optimizer import QueryOptimizer
from tests.unit.test_query_relative_dates import read_range, utc

NOW = datetime(2024, 6, 10, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("query", "start", "end"),
    [
        ("what happened on May 3", utc(2024, 5, 1), utc(2024, 6, 1)),
        ("on March 14 we shipped", utc(2024, 3, 1), utc(2024, 4, 1)),
        # LoCoMo writes its dates day first: "8 May, 2023".
        ("what happened on 3 May", utc(2024, 5, 1), utc(2024, 6, 1)),
        ("what happened on Aug 15", utc(2023, 8, 1), utc(2023, 9, 1)),
        ("on Mar 3", utc(2024, 3, 1), utc(2024, 4, 1)),
        ("the report due by dec 1", utc(2023, 12, 1), utc(2024, 1, 1)),
        ("notes from March 14", utc(2024, 3, 1), utc(2024, 4, 1)),
    ],
)
def test_a_day_beside_an_ambiguous_month_after_a_date_word_is_that_month(
    query: str, start: datetime, end: datetime
) -> None:
    assert read_range(query, NOW) == (start, end)


@pytest.mark.parametrize(
    ("query", "start", "end"),
    [
        ("what broke since 3 May", utc(2024, 5, 1), None),
        ("what broke before 3 May", None, utc(2024, 6, 1)),
        ("what broke after Aug 15", utc(2023, 8, 1), None),
    ],
)
def test_a_day_first_date_keeps_the_side_its_word_asks(
    query: str, start: datetime | None, end: datetime | None
) -> None:
    assert read_range(query, NOW) == (start, end)


@pytest.mark.parametrize(
    "query",
    [
        "may 3 people come to the offsite",
        "we may 3d print the case",
        "we march 14 miles a day",
        "what if 3 may fail",
        "and may 3 replicas be enough",
        "we want to march 14 miles",
        # A number after "of", "between", "from" or "by" is often a count, and "may" the modal after it.
        "one of 3 may fail",
        "choosing between 2 may take a while",
        "results from 3 may differ",
        "divided by 3 may overflow",
    ],
)
def test_a_day_beside_an_ambiguous_month_with_no_date_word_is_no_date(query: str) -> None:
    analysis = QueryOptimizer(clock=lambda: NOW).analyze(query)

    assert (analysis.entities.months, analysis.event_time_from, analysis.event_time_to) == ((), None, None)


@pytest.mark.parametrize(
    ("query", "start", "end"),
    [
        ("What did Caroline do May 3?", utc(2024, 5, 1), utc(2024, 6, 1)),
        ("Where was Mel March 14?", utc(2024, 3, 1), utc(2024, 4, 1)),
        ("What did Caroline paint 3 May?", utc(2024, 5, 1), utc(2024, 6, 1)),
        ("what changed Dec 1", utc(2023, 12, 1), utc(2024, 1, 1)),
    ],
)
def test_a_day_beside_an_ambiguous_month_written_capitalised_inside_a_sentence_is_that_month(
    query: str, start: datetime, end: datetime
) -> None:
    # Inside a sentence neither the modal nor the verb is capitalised: "May 3", "March 14" there are dates.
    assert read_range(query, NOW) == (start, end)


@pytest.mark.parametrize(
    "query",
    [
        "May 3 people come to the offsite?",  # a capital opening the query is the sentence's, not the month's
        "March 14 miles before lunch",
        "Thanks. May 3 people come?",
        "Quick one: May 3 replicas be enough?",
        "what happened may 3",  # lowercase: no capital to read
    ],
)
def test_a_capital_opening_a_sentence_does_not_date_an_ambiguous_month(query: str) -> None:
    analysis = QueryOptimizer(clock=lambda: NOW).analyze(query)

    assert (analysis.entities.months, analysis.event_time_from, analysis.event_time_to) == ((), None, None)


@pytest.mark.parametrize(
    "query",
    [
        "How May 3 Replicas Fail",  # every word capitalised: the capital is the style's, not the month's
        "Why March 14 Miles Hurt",
        "Can Dec 1 Builds Pass on Arm",  # short words may stay lowercase in Title Case
        "WHAT HAPPENS IF MAY 3 NODES FAIL",
    ],
)
def test_a_capital_in_a_title_case_query_does_not_date_an_ambiguous_month(query: str) -> None:
    analysis = QueryOptimizer(clock=lambda: NOW).analyze(query)

    assert (analysis.entities.months, analysis.event_time_from, analysis.event_time_to) == ((), None, None)


def test_a_date_word_still_dates_a_month_in_a_title_case_query() -> None:
    assert read_range("What Happened on May 3", NOW) == (utc(2024, 5, 1), utc(2024, 6, 1))


def test_two_capitalised_words_are_no_title_case_and_still_date_a_month_beside_a_day() -> None:
    # One or two capitals in a row are as likely two names as a style: "Caroline May 3" is Caroline on May 3.
    assert read_range("Caroline May 3", NOW) == (utc(2024, 5, 1), utc(2024, 6, 1))
