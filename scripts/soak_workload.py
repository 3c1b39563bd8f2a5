"""The soak's mixed workload and its ledger of acknowledged writes, checked against the service at the end.

Every write carries `metadata.soak_revision`; the ledger keeps, per document, the revision of its last
acknowledged write (None once a delete was acknowledged). Writes to one document go one at a time
(a lock per document), so the ledger's order is the order the service applied them. A write whose
answer never came (timeout, broken connection) or was an error leaves that document uncertain: it is
counted and left out of the check instead of being guessed.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import httpx
from loadgen import QueryCursor, RunRecorder, SearchTarget, search_once

if TYPE_CHECKING:
    from collections.abc import Sequence

MIX: Final = {"search_miss": 0.55, "search_hit": 0.20, "ingest": 0.10, "reingest": 0.10, "delete": 0.05}
"""Shares of the operations started: searches dominate, as in an agent's memory."""
PICK_SEED: Final = 13


@dataclass(frozen=True, slots=True)
class SoakQueries:
    """Search texts: `misses` hands out distinct ones (cache misses), `hits` repeats a few (cache hits).

    `hit_target` is where the repeated texts search: a project nothing writes to during the soak (a
    team's settled knowledge), since every write to a project retires its cached answers.
    """

    misses: QueryCursor
    hits: QueryCursor
    hit_target: SearchTarget


class SoakWorkload:
    """Runs one operation at a time on request (`run(kind)`); keeps the search window and the write ledger."""

    def __init__(
        self,
        client: httpx.AsyncClient,
        target: SearchTarget,
        queries: SoakQueries,
        *,
        stored: Sequence[dict[str, Any]],
        fresh: Sequence[dict[str, Any]],
    ) -> None:
        self._client, self._target = client, target
        self._misses, self._hits, self._hit_target = queries.misses, queries.hits, queries.hit_target
        self._bodies = {document["id"]: document for document in stored}
        self._fresh = list(fresh)
        self._alive = list(self._bodies)
        self._locks: dict[str, asyncio.Lock] = {}
        self._rng = random.Random(PICK_SEED)
        self._next_revision = 1
        self.expected: dict[str, int | None] = dict.fromkeys(self._bodies, 0)
        self.uncertain: set[str] = set()
        self.window = RunRecorder()
        self._counts: dict[str, dict[str, int]] = {}

    def take_window(self) -> RunRecorder:
        """The searches since the last call; starts a new window."""
        window, self.window = self.window, RunRecorder()
        return window

    def operation_counts(self) -> dict[str, dict[str, int]]:
        """Per operation kind: how many were acknowledged (`ok`) and how many failed (`failed`)."""
        return {kind: dict(outcomes) for kind, outcomes in sorted(self._counts.items())}

    async def run(self, kind: str) -> None:
        """One operation of `kind` (a key of `MIX`)."""
        if kind in {"search_miss", "search_hit"}:
            hit = kind == "search_hit"
            text = self._hits.next_text() if hit else self._misses.next_text()
            target = self._hit_target if hit else self._target
            status = await search_once(self._client, target, text, self.window, started=time.perf_counter())
            self._count(kind, "ok" if status == 200 else f"failed_{status or 'transport'}")
            return
        if kind == "ingest" and self._fresh:
            document = self._fresh.pop()
            self._bodies[document["id"]] = document
            await self._write(kind, document["id"])
            return
        if not self._alive:
            return
        document_id = self._rng.choice(self._alive)
        if kind == "delete":
            self._alive.remove(document_id)  # no later pick targets it, though a re-ingest already queued may
        await self._write(kind, document_id)

    async def _write(self, kind: str, document_id: str) -> None:
        lock = self._locks.setdefault(document_id, asyncio.Lock())
        async with lock:
            revision = self._next_revision
            self._next_revision += 1
            path = f"/v1/projects/{self._target.project}/documents"
            try:
                if kind == "delete":
                    response = await self._client.delete(f"{path}/{document_id}")
                else:
                    body = dict(self._bodies[document_id])
                    body["text"] = f"{body['text']} Soak revision {revision}."
                    body["metadata"] = {"soak_revision": revision}
                    response = await self._client.post(path, json=body)
            except httpx.HTTPError:
                self._count(kind, "failed")
                self.uncertain.add(document_id)
                return
            if not response.is_success:
                self._count(kind, f"failed_{response.status_code}")
                self.uncertain.add(document_id)
                return
            self._count(kind, "ok")
            self.expected[document_id] = None if kind == "delete" else revision
            if kind == "ingest":
                self._alive.append(document_id)

    def _count(self, kind: str, outcome: str) -> None:
        outcomes = self._counts.setdefault(kind, {})
        outcomes[outcome] = outcomes.get(outcome, 0) + 1

    async def verify(self) -> dict[str, Any]:
        """Read every document of the ledger back: present at its revision and indexed, or gone."""
        checked = lost = stale = resurrected = not_indexed = 0
        for document_id, revision in sorted(self.expected.items()):
            if document_id in self.uncertain:
                continue
            checked += 1
            response = await self._client.get(f"/v1/projects/{self._target.project}/documents/{document_id}")
            if revision is None:
                resurrected += response.status_code != 404
                continue
            if response.status_code != 200:
                lost += 1
                continue
            stored = response.json()
            stale += stored["metadata"].get("soak_revision", 0) != revision
            not_indexed += not stored["lexically_indexed"]
        return {
            "documents_checked": checked,
            "uncertain_left_out": len(self.uncertain),
            "deleted_expected": sum(revision is None for revision in self.expected.values()),
            "lost": lost,
            "stale_revision": stale,
            "deleted_but_present": resurrected,
            "not_lexically_indexed": not_indexed,
        }
