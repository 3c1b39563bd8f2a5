"""The memory searches of one process hold at once: each request takes a share of `SEARCH_BYTES_IN_FLIGHT`.

A search holds its query's analysis, both legs' candidates, its hits (texts, explain) and the response
built from them; before this bound only `MAX_CONCURRENT_REQUESTS` (256) limited how many ran, and 256
maximal batches (32 queries of 8,000 characters, `limit` 100, `explain`) would need ~8 GiB in a pod of
2 GiB (docs/operations.md "Memory per pod"). A request waits until its share fits, holding nothing but
its parsed body; it is never refused or cut, and one larger than the whole allowance runs alone. A
short search (10 hits) is charged ~80 KiB: thousands fit, so under normal load none waits.

The share is held while the search runs and its response is built; it is given back before the response
is encoded, which follows at once with no other request running in between. The encoded answer (~9 MB
for a maximal batch) then waits in the connection's buffer until the client reads it, outside this bound.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from app.ingestion.admission import Allowance, shared_allowance
from app.search.paging import PAGE_DEPTH

if TYPE_CHECKING:
    from collections.abc import Sequence
    from contextlib import AbstractAsyncContextManager

    from litestar.datastructures import State

    from app.search.calls import SearchCall
    from app.wiring.services import Services

SEARCH_BYTES_PER_QUERY_CHAR: Final = 48
"""Server memory per query character while it is searched (analysis, plan, lexical query, echo): 45 measured."""
SEARCH_BYTES_PER_HIT: Final = 8 * 1024
"""Server memory per hit asked for (leg candidates, hit with its chunk text and explain, response): 6-8 KiB
measured with chunks of ~1,400 characters (`CHUNK_MAX_CHARS` 1,500)."""
SEARCH_BYTES_IN_FLIGHT: Final = 160 * 1024 * 1024
"""Estimated search bytes one process holds at once: four maximal batches (~37 MiB charged each)."""
SEARCHES_IN_FLIGHT: Final = "searches_in_flight"
"""The app-state key of the allowance (made on first use, one per app and so per event loop)."""


def searches_in_flight(state: State) -> Allowance:
    """The app's allowance of search bytes, made on first use."""
    return shared_allowance(state, SEARCHES_IN_FLIGHT, SEARCH_BYTES_IN_FLIGHT)


def search_bytes(call: SearchCall, *, default_limit: int) -> int:
    """What one search is charged: its query's characters and the hits it ranks.

    A paged search (`offset`, `cursor`) ranks `PAGE_DEPTH` hits whatever its page size; without a
    `limit` a search ranks `default_limit` (`RRF_FINAL_K` as the flags give it to this caller).
    """
    limit = call.options.limit if call.options.limit is not None else default_limit
    hits = PAGE_DEPTH if call.page is not None else limit
    return len(call.query) * SEARCH_BYTES_PER_QUERY_CHAR + hits * SEARCH_BYTES_PER_HIT


def admit_searches(state: State, calls: Sequence[SearchCall]) -> AbstractAsyncContextManager[None]:
    """Hold the searches' share for the block, waiting until it fits; given back on exit, error or cancel.

    The flags are resolved only for a call that leaves its size to them (no `limit`, no page): a flags file
    or flagd may set `rrf_final_k` up to 100, ten times the environment's default; the environment's value
    charged such a search a tenth of what it ranks.
    """
    services: Services = state.services
    amount = 0
    for call in calls:
        default_limit = 0
        if call.options.limit is None and call.page is None:
            default_limit = services.flags.resolve(call.flag_context).knobs.rrf_final_k
        amount += search_bytes(call, default_limit=default_limit)
    return searches_in_flight(state).take(amount)
