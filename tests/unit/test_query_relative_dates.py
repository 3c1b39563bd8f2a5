"""Relative dates a person says to a memory ("3 days ago", "last Tuesday"), read against the clock (`as_of`).

The clock is Wednesday 2025-03-12 15:30 UTC unless a test says otherwise; its ISO week began Monday 03-10.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from app.domain.moments import EARLIEST
from app.query.optimizer import QueryOptimizer

NOW = datetime(2025, 3, 12, 15, 30, tzinfo=UTC)  # a Wednesday


def utc(year: int, month: int, day: int) -> datetime:
    return datetime(year, month, day, tzinfo=UTC)


def read_range(query: str, now: datetime = NOW) -> tuple[datetime | None, datetime | None]:
    analysis = QueryOptimizer(clock=lambda: now).analyze(query)
    return analysis.event_time_from, analysis.event_time_to


@pytest.mark.parametrize(
    ("query", "start", "end"),
    [
        # Days: that day. Weeks: the ISO week holding the day that many weeks back. Months: that calendar month.
        ("what did I do 3 days ago", utc(2025, 3, 9), utc(2025, 3, 10)),
        ("what did I eat a day ago", utc(2025, 3, 11), utc(2025, 3, 12)),
        ("what did we talk about three weeks ago", utc(2025, 2, 17), utc(2025, 2, 24)),
        ("what did she say a week ago", utc(2025, 3, 3), utc(2025, 3, 10)),
        ("who called two months ago", utc(2025, 1, 1), utc(2025, 2, 1)),
        ("who called 14 months ago", utc(2024, 1, 1), utc(2024, 2, 1)),
        ("what did he fix a fortnight ago", utc(2025, 2, 24), utc(2025, 3, 3)),
        ("what did he fix the week before last", utc(2025, 2, 24), utc(2025, 3, 3)),
        ("what did he fix the month before last", utc(2025, 1, 1), utc(2025, 2, 1)),
    ],
)
def test_a_count_of_days_weeks_or_months_ago_is_that_day_week_or_month(
    query: str, start: datetime, end: datetime
) -> None:
    assert read_range(query) == (start, end)


@pytest.mark.parametrize(
    ("query", "start", "end"),
    [
        # "a couple" is one to three units back, "a few" two to five, "several" three to seven.
        ("what happened a couple of days ago", utc(2025, 3, 9), utc(2025, 3, 12)),
        ("what happened a couple days ago", utc(2025, 3, 9), utc(2025, 3, 12)),
        ("what happened a few weeks ago", utc(2025, 2, 3), utc(2025, 3, 3)),
        ("what happened several months ago", utc(2024, 8, 1), utc(2025, 1, 1)),
    ],
)
def test_a_vague_count_ago_is_the_span_it_may_mean(query: str, start: datetime, end: datetime) -> None:
    assert read_range(query) == (start, end)


@pytest.mark.parametrize(
    ("query", "expression"),
    [
        ("what did I do 3 days ago", "3 days ago"),
        ("what did I eat a day ago", "1 day ago"),
        ("what did he fix a fortnight ago", "2 weeks ago"),
        ("what did he fix the week before last", "2 weeks ago"),
        ("what happened a few weeks ago", "2 to 5 weeks ago"),
    ],
)
def test_a_count_ago_is_named_by_its_number_of_units(query: str, expression: str) -> None:
    analysis = QueryOptimizer(clock=lambda: NOW).analyze(query)

    assert analysis.entities.relative_dates == (expression,)


@pytest.mark.parametrize(
    "query",
    [
        # Years ago tell a fact of someone's past, told long after it (LoCoMo conv-26: "I moved from Sweden 4 years
        # ago" said in June 2023); the words find it, a range of that year would drop it.
        "Where did Caroline move from 4 years ago?",
        "What activity did Evan start one year ago?",
        "what hobby did he start a few years ago",
        "what did he start painting years ago",
        "How long ago was Caroline's 18th birthday?",
        "what did we say 0 days ago",
        "what did we say days ago",
        "the build finished an hour ago",
    ],
)
def test_years_ago_and_ago_without_a_count_of_days_weeks_or_months_are_no_dates(query: str) -> None:
    analysis = QueryOptimizer(clock=lambda: NOW).analyze(query)

    assert not analysis.has_date_filters
    assert read_range(query) == (None, None)


@pytest.mark.parametrize(
    ("query", "start", "end"),
    [
        # Said beside a named date, a relative one counts back from it, not from the clock: the named date alone.
        ("what did she finish 3 days ago in January 2022", utc(2022, 1, 1), utc(2022, 2, 1)),
        ("what did he fix two weeks ago, as mentioned on November 6, 2023", utc(2023, 11, 1), utc(2023, 12, 1)),
    ],
)
def test_a_count_ago_beside_a_named_date_leaves_the_named_date(query: str, start: datetime, end: datetime) -> None:
    assert read_range(query) == (start, end)


@pytest.mark.parametrize(
    ("query", "start", "end"),
    [
        ("errors since 3 days ago", utc(2025, 3, 9), None),
        ("errors until two weeks ago", None, utc(2025, 3, 3)),
        ("from two months ago to last week", utc(2025, 1, 1), utc(2025, 3, 10)),
    ],
)
def test_a_count_ago_takes_a_side_or_a_span_like_any_relative_date(
    query: str, start: datetime | None, end: datetime | None
) -> None:
    assert read_range(query) == (start, end)


@pytest.mark.parametrize(
    ("query", "asks_when"),
    [
        # A count back read as a date names the question's time: the range holds the evidence, and a boost for
        # turns whose text carries a date would favour any turn saying "yesterday" inside it.
        ("what did we talk about 3 days ago", False),
        ("who called two months ago", False),
        ("what did I fix a few weeks ago", False),
        # It still asks when where its words do, or where "ago" is no date: the telling says "4 years ago".
        ("When did we talk about the budget 3 days ago?", True),
        ("How long ago was Caroline's 18th birthday?", True),
        ("Where did Caroline move from 4 years ago?", True),
        ("what did she say two weeks ago, as mentioned on November 6, 2023", True),
    ],
)
def test_a_count_ago_read_as_a_date_does_not_ask_when(query: str, *, asks_when: bool) -> None:
    assert QueryOptimizer(clock=lambda: NOW).analyze(query).asks_when is asks_when


def test_days_ago_are_days_of_the_clocks_own_offset() -> None:
    tokyo = timezone(timedelta(hours=9))
    now = datetime(2025, 3, 12, 8, 0, tzinfo=tokyo)  # still 2025-03-11 in UTC

    start, end = read_range("what did I do 3 days ago", now)

    assert (start, end) == (datetime(2025, 3, 9, tzinfo=tokyo), datetime(2025, 3, 10, tzinfo=tokyo))


@pytest.mark.parametrize("query", ["the deploy 99999999999 days ago", "the deploy 99999999 months ago"])
def test_a_count_ago_past_year_one_is_the_empty_range_there(query: str) -> None:
    assert read_range(query) == (EARLIEST, EARLIEST)


@pytest.mark.parametrize(
    ("query", "start", "end", "expression"),
    [
        ("what did we decide the day before yesterday", utc(2025, 3, 10), utc(2025, 3, 11), "the day before yesterday"),
        ("what did I eat this morning", utc(2025, 3, 12), utc(2025, 3, 13), "today"),
        ("who called this afternoon", utc(2025, 3, 12), utc(2025, 3, 13), "today"),
        ("what are we cooking tonight", utc(2025, 3, 12), utc(2025, 3, 13), "today"),
        # The night runs past midnight: the evening before and the small hours of today.
        ("what did we talk about last night", utc(2025, 3, 11), utc(2025, 3, 13), "last night"),
        # Up to the end of today, from the start of the week, month or year.
        ("what did I buy earlier this week", utc(2025, 3, 10), utc(2025, 3, 13), "earlier this week"),
        ("what did I buy earlier this month", utc(2025, 3, 1), utc(2025, 3, 13), "earlier this month"),
        ("what happened earlier this year", utc(2025, 1, 1), utc(2025, 3, 13), "earlier this year"),
    ],
)
def test_days_said_in_words_are_read_against_the_clock(
    query: str, start: datetime, end: datetime, expression: str
) -> None:
    analysis = QueryOptimizer(clock=lambda: NOW).analyze(query)

    assert (analysis.event_time_from, analysis.event_time_to) == (start, end)
    assert analysis.entities.relative_dates == (expression,)


def test_since_the_day_before_yesterday_opens_the_range_after_it() -> None:
    assert read_range("errors since the day before yesterday") == (utc(2025, 3, 10), None)


@pytest.mark.parametrize(
    "query", ["the last night of the trip", "last night of the festival", "what do we eat at night", "every morning"]
)
def test_nights_and_mornings_that_are_not_today_or_last_night_are_no_dates(query: str) -> None:
    assert read_range(query) == (None, None)


@pytest.mark.parametrize(
    ("query", "now", "start", "end"),
    [
        # Its day of last week, through the latest one before today where that one is this week's: on a
        # Wednesday "last Tuesday" may be yesterday or the Tuesday of last week, and both are kept.
        ("what did we do last Friday", NOW, utc(2025, 3, 7), utc(2025, 3, 8)),
        ("what did we do last Wednesday", NOW, utc(2025, 3, 5), utc(2025, 3, 6)),
        ("what did we do last Tuesday", NOW, utc(2025, 3, 4), utc(2025, 3, 12)),
        ("what did we do last Monday", NOW, utc(2025, 3, 3), utc(2025, 3, 11)),
        ("what did we do last Friday night", NOW, utc(2025, 3, 7), utc(2025, 3, 8)),
        ("what did we do last sunday", utc(2025, 3, 10), utc(2025, 3, 9), utc(2025, 3, 10)),
        ("what did we do last monday", utc(2025, 3, 10), utc(2025, 3, 3), utc(2025, 3, 4)),
        ("what did we do last saturday", utc(2025, 3, 16), utc(2025, 3, 8), utc(2025, 3, 16)),
    ],
)
def test_last_and_a_weekday_is_that_day_of_last_week_or_the_latest_one(
    query: str, now: datetime, start: datetime, end: datetime
) -> None:
    assert read_range(query, now) == (start, end)


@pytest.mark.parametrize(
    ("query", "start", "end", "expression"),
    [
        ("what did we do last fri", utc(2025, 3, 7), utc(2025, 3, 8), "last friday"),
        ("what did we do last Tues", utc(2025, 3, 4), utc(2025, 3, 12), "last tuesday"),
        ("what did we do last tue", utc(2025, 3, 4), utc(2025, 3, 12), "last tuesday"),
        ("what did we do last thurs.", utc(2025, 3, 6), utc(2025, 3, 7), "last thursday"),
        ("what did we do last Thu", utc(2025, 3, 6), utc(2025, 3, 7), "last thursday"),
        ("what did we do last wed", utc(2025, 3, 5), utc(2025, 3, 6), "last wednesday"),
        ("what did we do last mon", utc(2025, 3, 3), utc(2025, 3, 11), "last monday"),
        ("what did we do last sun", utc(2025, 3, 9), utc(2025, 3, 10), "last sunday"),
    ],
)
def test_last_and_an_abbreviated_weekday_is_that_weekday(
    query: str, start: datetime, end: datetime, expression: str
) -> None:
    analysis = QueryOptimizer(clock=lambda: NOW).analyze(query)

    assert (analysis.event_time_from, analysis.event_time_to) == (start, end)
    assert analysis.entities.relative_dates == (expression,)


def test_last_sat_is_no_date() -> None:
    # "sat" is as often the verb: "the bench where she last sat".
    assert read_range("the bench where she last sat") == (None, None)


def test_last_and_a_weekday_is_named_and_takes_a_side() -> None:
    analysis = QueryOptimizer(clock=lambda: NOW).analyze("errors since last Tuesday")

    assert analysis.entities.relative_dates == ("last tuesday",)
    assert (analysis.event_time_from, analysis.event_time_to) == (utc(2025, 3, 4), None)


@pytest.mark.parametrize(
    "query",
    [
        # A weekday alone may lie ahead, and a plan for it is told before it (LoCoMo conv-44: "What type of date is
        # Andrew going on Sunday?" is answered by a turn of the Saturday before), or be a habit.
        "what did she say on Monday",
        "Monday's standup notes",
        "since Monday",
        "what is planned this Friday",
        "What type of date is Andrew going on Sunday?",
        "the last Friday of the month",
        "what did we eat the last Friday we met",
    ],
)
def test_a_weekday_without_last_is_no_date(query: str) -> None:
    assert read_range(query) == (None, None)


def test_last_and_a_weekday_beside_a_named_date_leaves_the_named_date() -> None:
    # LoCoMo conv-42: the Friday before 23 January 2022, not the one before the clock.
    assert read_range("What did Joanna just finish last Friday on 23 January, 2022?") == (
        utc(2022, 1, 1),
        utc(2022, 2, 1),
    )


@pytest.mark.parametrize(
    ("query", "now", "start", "end"),
    [
        # The Saturday and Sunday of last week: on a weekend day, the one before it.
        ("what did we do last weekend", NOW, utc(2025, 3, 8), utc(2025, 3, 10)),
        ("what did we do last weekend", utc(2025, 3, 15), utc(2025, 3, 8), utc(2025, 3, 10)),
        ("what did we do last weekend", utc(2025, 3, 17), utc(2025, 3, 15), utc(2025, 3, 17)),
        ("what did we do this past weekend", NOW, utc(2025, 3, 8), utc(2025, 3, 10)),
        ("what did we do the past weekend", NOW, utc(2025, 3, 8), utc(2025, 3, 10)),
    ],
)
def test_last_weekend_is_the_weekend_of_last_week(query: str, now: datetime, start: datetime, end: datetime) -> None:
    analysis = QueryOptimizer(clock=lambda: now).analyze(query)

    assert (analysis.event_time_from, analysis.event_time_to) == (start, end)
    assert analysis.entities.relative_dates == ("last weekend",)


@pytest.mark.parametrize(
    "query",
    [
        # "this weekend" and "over the weekend" name the coming weekend as often as the last one.
        "plans for this weekend",
        "what are they doing over the weekend",
        "What is Dave doing to relax on weekends?",
        "What sports activity did Evan and his partner try in a recent weekend?",
        "the last weekend of the trip",
    ],
)
def test_other_weekends_are_no_dates(query: str) -> None:
    assert read_range(query) == (None, None)


def test_last_weekend_beside_a_named_date_leaves_the_named_date() -> None:
    # LoCoMo conv-41: the weekend before April 10, 2023, not the one before the clock.
    assert read_range("What did Maria participate in last weekend before April 10, 2023?") == (None, utc(2023, 5, 1))


@pytest.mark.parametrize(
    ("query", "start", "end", "expression"),
    [
        # Up to the end of today, from that many units before today (as "the past week" is from a week before).
        ("what did we discuss in the last two weeks", utc(2025, 2, 26), utc(2025, 3, 13), "past 2 weeks"),
        ("errors over the past 3 days", utc(2025, 3, 9), utc(2025, 3, 13), "past 3 days"),
        ("deploys in the previous 6 months", utc(2024, 9, 12), utc(2025, 3, 13), "past 6 months"),
        ("who visited over the past two years", utc(2023, 3, 12), utc(2025, 3, 13), "past 2 years"),
        # A vague count reaches as far back as it may mean.
        ("what happened in the past few days", utc(2025, 3, 7), utc(2025, 3, 13), "past 5 days"),
        ("what happened over the last couple of weeks", utc(2025, 2, 19), utc(2025, 3, 13), "past 3 weeks"),
    ],
)
def test_the_last_or_past_count_of_units_runs_up_to_today(
    query: str, start: datetime, end: datetime, expression: str
) -> None:
    analysis = QueryOptimizer(clock=lambda: NOW).analyze(query)

    assert (analysis.event_time_from, analysis.event_time_to) == (start, end)
    assert analysis.entities.relative_dates == (expression,)


@pytest.mark.parametrize(
    ("query", "start", "end"),
    [
        # LoCoMo conv-50: the end of August 2023, not the two weeks before the clock.
        ("Where was Dave in the last two weeks of August 2023?", utc(2023, 8, 1), utc(2023, 9, 1)),
        ("what were the last 3 releases", None, None),
        ("the past 3 days in January 2022", utc(2022, 1, 1), utc(2022, 2, 1)),
    ],
)
def test_the_last_count_of_a_named_period_or_of_other_things_is_no_relative_date(
    query: str, start: datetime | None, end: datetime | None
) -> None:
    assert read_range(query) == (start, end)


def test_counts_up_to_thirty_are_read_in_words() -> None:
    assert read_range("what did I do twenty days ago") == (utc(2025, 2, 20), utc(2025, 2, 21))


@pytest.mark.parametrize("query", ["errors in the past 99999999999 days", "errors in the past 99999999 years"])
def test_the_past_count_reaching_before_year_one_starts_there(query: str) -> None:
    assert read_range(query) == (EARLIEST, utc(2025, 3, 13))
