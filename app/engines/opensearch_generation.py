"""Noticing that a project's OpenSearch index was lost or replaced, and recovering from it.

Each project has its own index behind its own alias (`app.engines.opensearch_projects`). An OpenSearch
node replaced empty, an index deleted by hand, a snapshot restored over it: the alias then leads
nowhere, or to another index than the one this process wrote to. Writes never create an index by
themselves (`require_alias`), so nothing squats the alias with a dynamic mapping; instead, before every
write of a project the adapter asks that project's `IndexGeneration.verify`:

1. The alias leads nowhere and this process never saw an index there: the project's first write. The
   index is created with the real mapping (`ensure_index`, which any number of replicas may run at once).
2. The alias leads nowhere but this process saw an index there (the project is known to exist): the
   index is recreated and counts as replaced.
3. The alias leads to another concrete index than last time (the generation is the index's name and
   its `index.uuid`, which OpenSearch draws anew at every creation): replaced.
4. Replaced: the project is queued for lexical indexing again from PostgreSQL (`refill`), then the new
   generation is remembered. Should the refill fail, the old generation is kept and the next write
   tries again, so a crash or an outage in between never leaves the new index half filled for good.

`ProjectGenerations` holds one `IndexGeneration` per project. It learns every project index the cluster
holds in one request (`discover`: at start, and on the outbox's idle call, which also checks the known
ones), so a project this process never wrote is known too once it was seen. Every running replica that
notices a replacement refills; the refill is idempotent (outbox entries are rewritten in place), so
several at once only repeat work. While a known project's alias leads nowhere, its searches and `ping`
fail (its searches are `degraded` to the semantic leg, `/readyz` answers 200 `degraded`); a project never
seen reads as one without chunks. An index lost while no replica runs is recreated empty by the project's
next write and needs `poimen reindex --project <id>` (nothing remembers the old generation).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from opensearchpy.exceptions import NotFoundError

from app.domain.errors import EngineUnavailableError
from app.engines.opensearch_lifecycle import ensure_index
from app.engines.opensearch_projects import project_alias, project_aliases_pattern, project_of_index
from app.engines.opensearch_responses import ENGINE_NAME, translate_errors

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterable, Mapping

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
    """Which index generation behind one alias this process writes to; recreates and refills when lost or replaced."""

    def __init__(
        self,
        client: AsyncOpenSearch,
        *,
        alias: str,
        recreate: Callable[[], Awaitable[object]],
        refill: Callable[[], Awaitable[object]] | None,
        holds_documents: Callable[[], Awaitable[bool]] | None = None,
    ) -> None:
        self._client, self._alias = client, alias
        self._recreate, self._refill, self._holds_documents = recreate, refill, holds_documents
        self._seen: Generation | None = None
        self._refill_owed = False
        self._lock = asyncio.Lock()
        self.alias_missing = False
        """True from a check that found the alias leading nowhere until one finds it back."""
        self.refills = 0
        """Refills this process ran (each queued the project again)."""

    async def current(self, options: Mapping[str, Any]) -> Generation | None:
        """The generation the alias leads to now; None when it leads nowhere (or to a squatting index)."""
        with translate_errors():
            try:
                response = await self._client.indices.get_settings(index=self._alias, **options)
            except NotFoundError:
                return None
        return generation_from_settings(self._alias, response)

    @property
    def lock(self) -> asyncio.Lock:
        """Held while the project's index is checked, made or deleted in this process."""
        return self._lock

    async def holds_documents(self) -> bool:
        """Whether PostgreSQL holds a document of the project (always True without a way to ask)."""
        return self._holds_documents is None or await self._holds_documents()

    async def verify(self, options: Mapping[str, Any]) -> bool:
        """Return once the alias leads to an index that holds (or is being refilled with) the project's chunks.

        False, with no index made, when the alias leads nowhere and the project holds no document in
        PostgreSQL: its index was deleted with the project (`OpenSearchLexicalIndex.prune_emptied_projects`,
        on any replica), and what is being written can only be deletes or a stale writer's chunks of
        documents deleted since.
        The project is forgotten: its next document creates the index anew.

        Raises:
            EngineError: the cluster failed, the index could not be recreated, or the refill failed;
                the caller's write must wait for a later attempt.
        """
        async with self._lock:  # one check at a time per process: a replacement is refilled once here
            found = await self.current(options)
            if found is None and not await self.holds_documents():
                self._seen, self._refill_owed, self.alias_missing = None, False, False
                return False
            if found is None and self._seen is None:
                await self._recreate()  # a first write: nothing was there to lose
                found = await self._required(options)
            elif found is None:
                self.alias_missing = True
                logger.warning("opensearch alias %s leads to no index: recreating it", self._alias)
                await self._recreate()
                found = await self._required(options)
                self._refill_owed = True
            self.alias_missing = False
            if self._seen is not None and found != self._seen:
                self._refill_owed = True
            self._seen = found
            if self._refill_owed:
                logger.warning(
                    "opensearch index behind %s was replaced (now %s): queueing its project again",
                    self._alias,
                    found.index,
                )
                if self._refill is not None:
                    await self._refill()  # on failure the refill stays owed: the next write tries again
                self._refill_owed = False
                self.refills += 1
            return True

    @property
    def seen(self) -> Generation | None:
        """The generation this process last saw behind the alias; None before it saw one."""
        return self._seen

    def saw(self, generation: Generation) -> None:
        """Remember `generation` as seen (listed by `ProjectGenerations.discover`) unless one was seen already."""
        if self._seen is None:
            self._seen = generation

    async def _required(self, options: Mapping[str, Any]) -> Generation:
        found = await self.current(options)
        if found is None:
            msg = f"opensearch alias {self._alias} still leads to no index after recreating it"
            raise EngineUnavailableError(msg, engine=ENGINE_NAME)
        return found


class ProjectGenerations:
    """One `IndexGeneration` per project under `base`: created on first use, forgotten when the project is deleted."""

    def __init__(
        self,
        client: AsyncOpenSearch,
        *,
        base: str,
        replicas: int,
        refill: Callable[[str], Awaitable[object]] | None,
        holds_documents: Callable[[str], Awaitable[bool]] | None = None,
    ) -> None:
        self._client, self._base, self._replicas, self._refill = client, base, replicas, refill
        self._holds_documents = holds_documents
        self._by_project: dict[str, IndexGeneration] = {}
        self._forgotten_refills = 0

    def alias(self, project_id: str) -> str:
        """The project's alias."""
        return project_alias(self._base, project_id)

    def of(self, project_id: str) -> IndexGeneration:
        """The project's generation check (made on first use)."""
        generation = self._by_project.get(project_id)
        if generation is None:
            alias = self.alias(project_id)

            async def recreate() -> None:
                # One primary shard: the shard's BM25 statistics are then the project's own.
                await ensure_index(self._client, alias=alias, shards=1, replicas=self._replicas)

            async def refill() -> None:
                if self._refill is not None:
                    await self._refill(project_id)

            asked = self._holds_documents
            generation = IndexGeneration(
                self._client,
                alias=alias,
                recreate=recreate,
                refill=refill,
                holds_documents=None if asked is None else lambda: asked(project_id),
            )
            self._by_project[project_id] = generation
        return generation

    def is_known(self, project_id: str) -> bool:
        """Whether this process saw the project's index (so its alias leading nowhere means it was lost)."""
        generation = self._by_project.get(project_id)
        return generation is not None and generation.seen is not None

    def forget(self, project_id: str) -> None:
        """Drop the project (its index was deleted on purpose): its next write creates the index anew."""
        dropped = self._by_project.pop(project_id, None)
        if dropped is not None:
            self._forgotten_refills += dropped.refills

    async def verify(self, project_ids: Iterable[str], options: Mapping[str, Any]) -> frozenset[str]:
        """`IndexGeneration.verify` every listed project, concurrently; the projects left without an index.

        The first failure is raised once all ended.
        """
        listed = sorted(set(project_ids))
        results = await asyncio.gather(
            *(self.of(project_id).verify(options) for project_id in listed), return_exceptions=True
        )
        failure = next((result for result in results if isinstance(result, BaseException)), None)
        if failure is not None:
            raise failure
        return frozenset(project_id for project_id, indexed in zip(listed, results, strict=True) if indexed is False)

    async def discover(self, options: Mapping[str, Any]) -> dict[str, Generation]:
        """Every project index of the current schema the cluster holds now (one request); each becomes known."""
        with translate_errors():
            try:
                response = await self._client.indices.get_settings(index=project_aliases_pattern(self._base), **options)
            except NotFoundError:
                return {}
        listed: dict[str, Generation] = {}
        for index, body in response.items():
            project_id = project_of_index(self._base, index)
            found = generation_from_settings(self.alias(project_id), {index: body}) if project_id else None
            if project_id is not None and found is not None:
                listed[project_id] = found
                self.of(project_id).saw(found)
        return listed

    async def check_known(self, options: Mapping[str, Any]) -> None:
        """Verify every known project whose index is not the one last seen (lost or replaced); learn new ones."""
        known = {project_id: generation.seen for project_id, generation in self._by_project.items() if generation.seen}
        listed = await self.discover(options)
        await self.verify((project_id for project_id, seen in known.items() if listed.get(project_id) != seen), options)

    async def lost(self, options: Mapping[str, Any]) -> list[str]:
        """The known projects whose alias leads to no index now, sorted; a project holding no document is not lost.

        Such a project's index was deleted with it (`prune_emptied_projects`, maybe by another replica): it is
        forgotten here.
        """
        known = [project_id for project_id, generation in self._by_project.items() if generation.seen is not None]
        listed = await self.discover(options)
        lost: list[str] = []
        for project_id in sorted(project_id for project_id in known if project_id not in listed):
            if await self.of(project_id).holds_documents():
                lost.append(project_id)
            else:
                self.forget(project_id)
        return lost

    @property
    def alias_missing(self) -> bool:
        """True while any project's last check found its alias leading nowhere."""
        return any(generation.alias_missing for generation in self._by_project.values())

    @property
    def refills(self) -> int:
        """Project refills this process ran."""
        return self._forgotten_refills + sum(generation.refills for generation in self._by_project.values())
