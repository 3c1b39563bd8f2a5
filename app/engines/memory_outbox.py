"""The lexical outbox of `InMemoryDocumentStore` (`app.engines.memory`): queued versions, leases, claims by turns.

The in-memory counterpart of `app.engines.postgres_outbox` (its claim order is `CLAIM_QUEUED`'s), with the same
contracts:
- An entry is one document awaiting lexical indexing, at the outbox version of its latest change; versions
  come from one sequence for every document, so a later change has a higher one.
- A claim leases its entries for `lease_s`: later claims leave them until the lease runs out, so a crashed
  claimer's entries come back. Claiming does not dequeue: `complete` does; `release` gives entries back early.
- Queuing a document again (a new change) ends any lease on it.
- Completing a claimed version leaves a newer change queued.
"""

from __future__ import annotations

import copy
import itertools
from collections import Counter
from typing import TYPE_CHECKING

from app.domain.models import OutboxStats

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from app.domain.document_versions import DocumentKey
    from app.domain.models import DocumentChunks


class InMemoryOutbox:
    """The queued documents, each at its latest outbox version, with when it was queued and its lease."""

    def __init__(self, *, lease_s: float, clock: Callable[[], float]) -> None:
        self._versions: dict[DocumentKey, int] = {}
        self._queued_at: dict[DocumentKey, float] = {}
        self._leases: dict[DocumentKey, float] = {}
        self._sequence = itertools.count(1)
        self._lease_s = lease_s
        self._clock = clock

    def __contains__(self, key: object) -> bool:
        """Whether the document awaits lexical indexing."""
        return key in self._versions

    def copy(self) -> InMemoryOutbox:
        """A copy whose queued documents later changes to this outbox leave alone (what a project snapshot reads)."""
        copied = copy.copy(self)
        copied._versions = dict(self._versions)  # noqa: SLF001 - its own class
        return copied

    def queue(self, key: DocumentKey) -> None:
        """A new outbox version for the document; it ends any lease, as in PostgreSQL."""
        self._versions[key] = next(self._sequence)
        self._queued_at[key] = self._clock()
        self._leases.pop(key, None)

    def claim(self, *, limit: int) -> list[tuple[DocumentKey, int]]:
        """Lease up to `limit` queued documents no one holds; each with its version, oldest version first.

        Projects take turns: every project's oldest change, oldest first, then every project's second (`CLAIM_QUEUED`).
        """
        now = self._clock()
        free = sorted(
            ((key, version) for key, version in self._versions.items() if self._leases.get(key, 0.0) <= now),
            key=lambda item: item[1],
        )
        turns: Counter[str] = Counter()
        turn_of: dict[tuple[str, str], int] = {}
        for key, _ in free:
            turns[key[0]] += 1
            turn_of[key] = turns[key[0]]
        picked = sorted(free, key=lambda item: (turn_of[item[0]], item[1]))[: max(limit, 0)]
        queued = sorted(picked, key=lambda item: item[1])
        for key, _ in queued:
            self._leases[key] = now + self._lease_s
        return queued

    def release(self, documents: Sequence[DocumentChunks]) -> None:
        """End the lease of these claimed entries (only of the version each claimed)."""
        for document in documents:
            key = (document.project_id, document.document_id)
            if self._versions.get(key) == document.outbox_version:
                self._leases.pop(key, None)

    def complete(self, documents: Sequence[DocumentChunks]) -> list[DocumentKey]:
        """Dequeue entries at or below their claimed version; return the documents dequeued."""
        dequeued: list[DocumentKey] = []
        for document in documents:
            key = (document.project_id, document.document_id)
            version = self._versions.get(key)
            if version is None or (document.outbox_version is not None and version > document.outbox_version):
                continue  # changed after the claim: stays queued
            del self._versions[key]
            self._leases.pop(key, None)
            self._queued_at.pop(key, None)
            dequeued.append(key)
        return dequeued

    def stats(self, *, through: int | None = None) -> OutboxStats:
        """How many documents await lexical indexing (queued by `through`), how long the oldest has waited."""
        oldest = min(self._queued_at.values(), default=None)
        backlog = sum(1 for version in self._versions.values() if through is None or version <= through)
        age_s = 0.0 if oldest is None else self._clock() - oldest
        return OutboxStats(backlog=backlog, oldest_age_s=age_s, newest_version=max(self._versions.values(), default=0))

    def project_backlog(self, project_id: str) -> tuple[int, float]:
        """How many of the project's documents are queued, and how long the oldest of them has waited (0.0: none)."""
        pending = [key for key in self._versions if key[0] == project_id]
        oldest = min((self._queued_at[key] for key in pending if key in self._queued_at), default=None)
        return len(pending), 0.0 if oldest is None else self._clock() - oldest
