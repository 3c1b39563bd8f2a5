"""A bounded amount (bytes of bodies, chunks, a search's estimated bytes) that concurrent requests take a share of.

Ingests take theirs before they hold memory (`app/api/document_routes.py`, `app/ingestion/pipeline.py`),
searches before they run (`app/api/search_admission.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, MutableMapping


class Allowance:
    """At most `limit` units taken at once by the requests of one process; the others wait, holding nothing.

    A request larger than `limit` still runs, alone (`take` admits any amount when nothing is taken), so
    a share is never refused here: the caller refuses what is over its own bound first. Smaller requests
    go ahead of a large one waiting for room, and a waiter wakes when any share is given back. Given back
    synchronously, so a cancelled request never keeps its share. One event loop's requests only.
    """

    def __init__(self, limit: int) -> None:
        if limit < 1:
            msg = f"limit must be at least 1, got {limit}"
            raise ValueError(msg)
        self.limit = limit
        self.taken = 0
        self._waiters: list[asyncio.Future[None]] = []

    @property
    def waiting(self) -> int:
        """How many requests are waiting for room now."""
        return len(self._waiters)

    def _fits(self, amount: int) -> bool:
        return self.taken == 0 or self.taken + amount <= self.limit

    @contextlib.asynccontextmanager
    async def take(self, amount: int) -> AsyncIterator[None]:
        """Hold `amount` units for the block, waiting until they fit (or until nothing else is held)."""
        while not self._fits(amount):
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                self._waiters.remove(waiter)
        self.taken += amount
        try:
            yield
        finally:
            self.taken -= amount
            for waiter in self._waiters:
                if not waiter.done():
                    waiter.set_result(None)


def shared_allowance(state: MutableMapping[str, object], key: str, limit: int) -> Allowance:
    """The `Allowance` kept in `state` (an app's state) under `key`, made with `limit` on first use.

    One per app, and so one per event loop, as `Allowance` needs; a test may put a smaller one there first.
    """
    allowance = state.get(key)
    if not isinstance(allowance, Allowance):
        allowance = state[key] = Allowance(limit)
    return allowance


class KeyedAllowances:
    """One `Allowance` of `limit` per key (a project), kept only while a request of that key holds or awaits a share.

    Taken before a shared allowance, it caps what one key's requests hold of it: a key's further requests wait
    on their own allowance, holding nothing of the shared one, and other keys still find room there.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._allowances: dict[str, Allowance] = {}

    def __len__(self) -> int:
        """How many keys hold or await a share now."""
        return len(self._allowances)

    @contextlib.asynccontextmanager
    async def take(self, key: str, amount: int) -> AsyncIterator[None]:
        """Hold `amount` units of `key`'s allowance for the block, waiting until they fit."""
        allowance = self._allowances.setdefault(key, Allowance(self.limit))
        try:
            async with allowance.take(amount):
                yield
        finally:
            if allowance.taken == 0 and allowance.waiting == 0 and self._allowances.get(key) is allowance:
                del self._allowances[key]


def shared_keyed_allowances(state: MutableMapping[str, object], key: str, limit: int) -> KeyedAllowances:
    """The `KeyedAllowances` kept in `state` under `key`, made with `limit` on first use (see `shared_allowance`)."""
    allowances = state.get(key)
    if not isinstance(allowances, KeyedAllowances):
        allowances = state[key] = KeyedAllowances(limit)
    return allowances
