"""Search paging: which page a request asks for, and the cursor of the next one.

The cursor carries the next offset, the project generation the ranking was made at, the moment relative
dates were resolved against, the query's names its first page read as the project's speakers, a digest of
the hits the pages so far were cut from, and a fingerprint of the query, its options and its `as_of` (a
cursor replayed with another query or another `as_of` is a 400).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from app.api.cursors import decode_cursor, encode_cursor
from app.domain.errors import InvalidQueryError
from app.domain.moments import as_utc
from app.search.paging import PAGE_DEPTH, SearchPage

if TYPE_CHECKING:
    from app.query.planner import SearchOptions
    from app.search.calls import SearchOutcome

SEARCH_CURSOR: Final = "search"


@dataclass(frozen=True, slots=True)
class SearchPaging:
    """What a search request asks of paging: its page (None: unpaged) and the clock its relative dates use.

    `as_of` is the request's own (None: not given); `clock` is what the search resolves "last week" against.
    """

    page: SearchPage | None
    as_of: datetime | None
    clock: datetime | None


def _fingerprint(query: str, options: SearchOptions, as_of: datetime | None) -> str:
    """What a cursor is bound to: the query, every option but the page size, and the request's `as_of`.

    `as_of` counts with its offset: 02:00+02:00 and 00:00Z are one instant but not one "today" (relative
    dates are read in the offset's days). Absent, the text is what it was before `as_of` existed, so a
    cursor minted by an older replica during a rolling update stays valid (and one minted with a UTC
    `as_of` too: both spell it `+00:00`).
    """
    text = f"{query}\x1f{replace(options, limit=None)!r}"
    if as_of is not None:
        text += f"\x1fas_of={as_of.isoformat()}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _cursor_clock(values: dict[str, Any]) -> datetime | None:
    """The moment a cursor's first page resolved relative dates against (None: a cursor minted without one)."""
    text = values.get("t")
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text) if isinstance(text, str) else None
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:
        msg = "cursor is not a cursor this endpoint returned"
        raise InvalidQueryError(msg, field="cursor")
    return moment


def search_paging(
    query: str, options: SearchOptions, *, as_of: datetime | None, offset: int | None, cursor: str | None
) -> SearchPaging:
    """The page asked for and its clock; a cursor of another query or `as_of`, or a foreign cursor, is a 400.

    A paged search fixes its clock here rather than leaving it to the optimizer, and its cursor carries it:
    every later page then resolves "last week" against the first page's moment, even across midnight or a
    week's end, so its date filter, and with it the ranking (and cache entry) it is cut from, is the first
    page's. A cursor therefore never mixes two weeks. The request's own `as_of` is in the fingerprint instead:
    another `as_of` is another question, refused like another query.
    """
    if cursor is None:
        if offset is None:
            return SearchPaging(page=None, as_of=as_of, clock=as_of)
        return SearchPaging(page=SearchPage(offset=offset), as_of=as_of, clock=as_of or datetime.now(UTC))
    if offset is not None:
        msg = "give offset or cursor, not both"
        raise InvalidQueryError(msg, field="offset")
    values = decode_cursor(cursor, kind=SEARCH_CURSOR)
    start, generation = values.get("o"), values.get("g")
    if values.get("f") != _fingerprint(query, options, as_of):
        msg = "cursor belongs to another query, other options or another as_of"
        raise InvalidQueryError(msg, field="cursor")
    # A bool is an int to isinstance: `"o": true` was taken for offset 1 and echoed as `"offset": true`.
    if (
        not isinstance(start, int)
        or isinstance(start, bool)
        or not 0 <= start < PAGE_DEPTH
        or not isinstance(generation, int | None)
        or isinstance(generation, bool)
        or not isinstance(values.get("h"), str | None)
    ):
        msg = "cursor is not a cursor this endpoint returned"
        raise InvalidQueryError(msg, field="cursor")
    clock = as_of or _cursor_clock(values) or datetime.now(UTC)
    served = values.get("h")  # absent in a cursor of a release before it: no check
    page = SearchPage(offset=start, generation=generation, speakers=_cursor_speakers(values), served=served)
    return SearchPaging(page=page, as_of=as_of, clock=clock)


def _cursor_speakers(values: dict[str, Any]) -> frozenset[str] | None:
    """The query's names its first page read as the project's speakers (None: a cursor minted without them)."""
    names = values.get("s")
    if names is None:
        return None
    if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
        msg = "cursor is not a cursor this endpoint returned"
        raise InvalidQueryError(msg, field="cursor")
    return frozenset(names)


def next_cursor(query: str, options: SearchOptions, paging: SearchPaging, outcome: SearchOutcome) -> str | None:
    """The cursor of the page after `outcome`'s, or None when the ranking holds no more hits."""
    if outcome.next_offset is None:
        return None
    values: dict[str, Any] = {
        "o": outcome.next_offset,
        "g": outcome.generation,
        "f": _fingerprint(query, options, paging.as_of),
        "s": sorted(outcome.speakers),  # every page plans as the first did, on whichever replica
        "h": outcome.served_digest,  # a later page cut from another ranking says so, whatever the generation
    }
    if paging.clock is not None:
        values["t"] = as_utc(paging.clock).isoformat()
    return encode_cursor(SEARCH_CURSOR, values)
