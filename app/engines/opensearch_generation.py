"""Noticing that the OpenSearch index behind the alias was lost or replaced, and recovering from it.

An OpenSearch node replaced empty, an index deleted by hand, a snapshot restored over it: the alias
then leads nowhere, or to another index than the one this process wrote to. Writes never create an
index by themselves (`require_alias`), so nothing squats the alias with a dynamic mapping; instead,
before every write the adapter asks `IndexGeneration.verify`:

1. The alias leads nowhere: the index is recreated with the real mapping (`ensure_index`, which any
   number of replicas may run at once) and counts as replaced.
2. The alias leads to another concrete index than last time (the generation is the index's
   name and its `index.uuid`, which OpenSearch draws anew at every creation): replaced.
3. Replaced: every project is queued for lexical indexing again from PostgreSQL (`refill`), then the new
   generation is remembered. Should the refill fail, the old generation is kept and the next write
   tries again, so a crash or an outage in between never leaves the new index half filled for good.

Every running replica that notices a replacement refills; the refill is idempotent (outbox entries are
rewritten in place), so several at once only repeat work. While the alias leads nowhere, searches and
`ping` fail (the lexical leg is `degraded`, `/readyz` is not ready). An index lost while no replica runs
is recreated empty at the next start and needs `poimen reindex` (nothing remembers the old generation).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from opensearchpy.exceptions import NotFoundError

from app.domain.errors import EngineUnavailableError
from app.engines.opensearch_responses import ENGINE_NAME, translate_errors

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

    from opensearchpy import AsyncOpenSearch

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Generation:
    """One creation of the concrete index behind the alias."""

    index: str
    uuid: str


def generation_from_settings(alias: str, response: Mapping[str, Any]) -> Generation | None:
    """The generation an `indices.get_settings(index=alias)` response names, or None.

    None unless exactly one index other than `alias` itself answers: a concrete index squatting the
    alias name is not ours.
    """
    if len(response) != 1:
        return None
    index, body = next(iter(response.items()))
    uuid = body.get("settings", {}).get("index", {}).get("uuid") if isinstance(body, dict) else None
    if index == alias or not isinstance(uuid, str) or not uuid:
        return None
    return Generation(index=index, uuid=uuid)


class IndexGeneration:
    """Which index generation this process writes to; recreates and refills when it is lost or replaced."""

    def __init__(
        self,
        client: AsyncOpenSearch,
        *,
        alias: str,
        recreate: Callable[[], Awaitable[object]],
        refill: Callable[[], Awaitable[object]] | None,
    ) -> None:
        self._client, self._alias = client, alias
        self._recreate, self._refill = recreate, refill
        self._seen: Generation | None = None
        self._refill_owed = False
        self._lock = asyncio.Lock()
        self.alias_missing = False
        """True from a check that found the alias leading nowhere until one finds it back."""
        self.refills = 0
        """Refills this process ran (each queued every project again)."""

    async def current(self, options: Mapping[str, Any]) -> Generation | None:
        """The generation the alias leads to now; None when it leads nowhere (or to a squatting index)."""
        with translate_errors():
            try:
                response = await self._client.indices.get_settings(index=self._alias, **options)
            except NotFoundError:
                return None
        return generation_from_settings(self._alias, response)

    async def verify(self, options: Mapping[str, Any]) -> None:
        """Return once the alias leads to an index that holds (or is being refilled with) every project.

        Raises:
            EngineError: the cluster failed, the index could not be recreated, or the refill failed;
                the caller's write must wait for a later attempt.
        """
        async with self._lock:  # one check at a time per process: a replacement is refilled once here
            found = await self.current(options)
            if found is None:
                self.alias_missing = True
                logger.warning("opensearch alias %s leads to no index: recreating it", self._alias)
                await self._recreate()
                found = await self.current(options)
                if found is None:
                    msg = f"opensearch alias {self._alias} still leads to no index after recreating it"
                    raise EngineUnavailableError(msg, engine=ENGINE_NAME)
                self._refill_owed = True
            self.alias_missing = False
            if self._seen is not None and found != self._seen:
                self._refill_owed = True
            self._seen = found
            if self._refill_owed:
                logger.warning(
                    "opensearch index behind %s was replaced (now %s): queueing every project again",
                    self._alias,
                    found.index,
                )
                if self._refill is not None:
                    await self._refill()  # on failure the refill stays owed: the next write tries again
                self._refill_owed = False
                self.refills += 1
