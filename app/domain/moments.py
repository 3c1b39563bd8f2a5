"""Points in time: every datetime past the edges is timezone-aware UTC."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import overload


@overload
def as_utc(moment: datetime) -> datetime: ...
@overload
def as_utc(moment: None) -> None: ...
def as_utc(moment: datetime | None) -> datetime | None:
    """`moment` in UTC; a naive datetime is taken as UTC already. None stays None."""
    if moment is None:
        return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
