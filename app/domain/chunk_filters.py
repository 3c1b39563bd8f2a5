"""The filters a chunk's own fields answer exactly: its event-time window and its source prefix. Pure.

The reference every adapter selects by (`app.domain.models.Filters`). An engine whose index holds less than
the chunk does (a date kept to the millisecond, a prefix query bounded in length) searches a wider set and
keeps the hits these accept.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.domain.moments import as_utc

if TYPE_CHECKING:
    from datetime import datetime

    from app.domain.models import Filters


def in_time_window(event_time: datetime | None, filters: Filters) -> bool:
    """`event_time_from` inclusive, `event_time_to` exclusive, to the microsecond; undated only with `include_undated`.

    Compared in UTC, so a naive moment (taken as UTC) never meets an aware one unconverted.
    """
    if filters.event_time_from is None and filters.event_time_to is None:
        return True
    if event_time is None:
        return filters.include_undated
    moment = as_utc(event_time)
    after_start = filters.event_time_from is None or moment >= as_utc(filters.event_time_from)
    before_end = filters.event_time_to is None or moment < as_utc(filters.event_time_to)
    return after_start and before_end


def has_source_prefix(source: str, filters: Filters) -> bool:
    """Whether `source` starts with `filters.source_prefix`, character for character (none or empty: every source)."""
    return not filters.source_prefix or source.startswith(filters.source_prefix)
