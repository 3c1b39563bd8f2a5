"""Points in time: every datetime past the edges is timezone-aware UTC."""

from __future__ import annotations

from datetime import MINYEAR, UTC, datetime
from typing import Final, overload

EARLIEST: Final = datetime.min.replace(tzinfo=UTC)
LATEST: Final = datetime.max.replace(tzinfo=UTC)
"""The ends of `datetime`'s range in UTC: where `as_utc` puts a moment its offset carries past them."""


@overload
def as_utc(moment: datetime) -> datetime: ...
@overload
def as_utc(moment: None) -> None: ...
def as_utc(moment: datetime | None) -> datetime | None:
    """`moment` in UTC; a naive datetime is taken as UTC already. None stays None.

    A moment whose offset carries it past the range of `datetime` (0001-01-01T00:00+10:00 is still year 0
    in UTC) becomes the nearest representable one, `datetime.min` or `datetime.max` in UTC.
    """
    if moment is None:
        return None
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    try:
        return moment.astimezone(UTC)
    except OverflowError:
        return EARLIEST if moment.year == MINYEAR else LATEST
