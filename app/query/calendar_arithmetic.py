"""Calendar steps in a given time zone: midnights, month starts, days and months back. Pure.

Every function stops at the ends of `datetime`'s range (years 1 to 9999) instead of raising, so a query date
counted past the calendar ("last month" in January of year 1) gives an edge, never a 500.
"""

from __future__ import annotations

from calendar import monthrange
from datetime import MAXYEAR, MINYEAR, datetime, timedelta, tzinfo

from app.domain.moments import EARLIEST, LATEST


def midnight(year: int, month: int, day: int, zone: tzinfo) -> datetime:
    """Midnight starting that day in `zone`, or the nearest end of `datetime`'s range for a year outside it."""
    if year < MINYEAR:
        return EARLIEST
    if year > MAXYEAR:
        return LATEST
    return datetime(year, month, day, tzinfo=zone)


def months_before(day: datetime, months: int, zone: tzinfo) -> datetime:
    """Midnight of `day`'s day of the month `months` months earlier, or that month's last day where it has none.

    A month before March 31 is February 29 (or 28), a year before February 29 is February 28.
    """
    year, month_index = divmod(day.year * 12 + day.month - 1 - months, 12)
    if year < MINYEAR:
        return EARLIEST
    return midnight(year, month_index + 1, min(day.day, monthrange(year, month_index + 1)[1]), zone)


def month_start(year: int, month: int, zone: tzinfo) -> datetime:
    """Midnight of the first of that month in `zone`."""
    return midnight(year, month, 1, zone)


def next_month_start(year: int, month: int, zone: tzinfo) -> datetime:
    """Midnight of the first of the month after that one in `zone`."""
    return month_start(year + 1, 1, zone) if month == 12 else month_start(year, month + 1, zone)  # noqa: PLR2004


def days_after(moment: datetime, days: int) -> datetime:
    """`moment` moved by `days` (negative: before), stopping at the ends of `datetime`'s range."""
    try:
        return moment + timedelta(days=days)
    except OverflowError:
        return EARLIEST if days < 0 else LATEST
