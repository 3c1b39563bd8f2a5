from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from app.domain.moments import as_utc


def test_a_naive_moment_is_taken_as_utc() -> None:
    naive = datetime(2024, 5, 1, 12)  # noqa: DTZ001 - the naive input is the case under test

    assert as_utc(naive) == datetime(2024, 5, 1, 12, tzinfo=UTC)


def test_an_offset_moment_is_converted() -> None:
    moment = datetime(2024, 5, 1, 12, tzinfo=timezone(timedelta(hours=2)))

    assert as_utc(moment) == datetime(2024, 5, 1, 10, tzinfo=UTC)


def test_a_moment_before_year_one_in_utc_becomes_the_earliest_one() -> None:
    moment = datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=14)))

    assert as_utc(moment) == datetime.min.replace(tzinfo=UTC)


def test_a_moment_after_year_9999_in_utc_becomes_the_latest_one() -> None:
    moment = datetime(9999, 12, 31, 23, 59, tzinfo=timezone(timedelta(hours=-14)))

    assert as_utc(moment) == datetime.max.replace(tzinfo=UTC)
