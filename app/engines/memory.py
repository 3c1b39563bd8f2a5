"""In-memory reference adapter `InMemoryDocumentStore` (its vector index: `app.engines.memory_vectors`).

Its lexical outbox is `app.engines.memory_outbox`'s `InMemoryOutbox`; the catalog reads (listings, export
pages, project stats) are `app.engines.memory_catalog`'s functions of its tables.

First-class fakes for unit tests of the use cases: they pass the same contract suites as the
PostgreSQL adapters. Setting `available = False` makes every call raise `EngineUnavailableError`,
which is how tests exercise fallbacks without killing a server.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from app.domain.document_versions import DocumentState, RestoreFloor, SavedVersions
from app.domain.errors import EngineUnavailableError, VersionConflictError
from app.domain.models import Chunk, DocumentChunks, EmbeddedChunk, StoredDocument
from app.engines import memory_catalog
from app.engines.memory_filters import chunk_matches, document_selected
from app.engines.memory_outbox import InMemoryOutbox

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Collection, Iterator, Mapping, Sequence

    from app.domain.catalog import DocumentSelection, DocumentSummary, ProjectStats
    from app.domain.document_versions import DocumentKey
    from app.domain.models import Filters, OutboxStats


@dataclass(frozen=True, slots=True)
class StoredChunk:
    """A chunk as the store keeps it: with its embedding, the model that made it, and whether it is indexed."""

    chunk: Chunk
    embedding: tuple[float, ...]
    embedding_model: str
    lexically_indexed: bool


class InMemoryDocumentStore:
    """`DocumentStore` in process memory, with the outbox versioning of the PostgreSQL store."""

    name = "memory"

    def __init__(self, *, outbox_lease_s: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.available = True
        self._documents: dict[DocumentKey, StoredDocument] = {}
        self._chunks: dict[DocumentKey, dict[str, StoredChunk]] = {}
        self._outbox = InMemoryOutbox(lease_s=outbox_lease_s, clock=clock)
        self._generations: dict[str, int] = {}
        self._locks: dict[DocumentKey, asyncio.Lock] = {}

    def _check_available(self) -> None:
        if not self.available:
            message = "memory store marked unavailable"
            raise EngineUnavailableError(message, engine=self.name)

    def embedded_chunks(self, project_id: str) -> Iterator[tuple[Chunk, tuple[float, ...]]]:
        """Every chunk of the project with its embedding (what `InMemoryVectorIndex` searches)."""
        self._check_available()
        for (chunk_project, _), stored_chunks in self._chunks.items():
            if chunk_project == project_id:
                for stored in stored_chunks.values():
                    yield stored.chunk, stored.embedding

    async def get_document(self, project_id: str, document_id: str) -> StoredDocument | None:
        """Return the document with its chunks in position order, or None."""
        self._check_available()
        key = (project_id, document_id)
        document = self._documents.get(key)
        if document is None:
            return None
        return replace(document, chunks=self._ordered_chunks(key), lexically_indexed=key not in self._outbox)

    async def document_states(self, keys: Sequence[DocumentKey]) -> dict[DocumentKey, DocumentState]:
        """Return the content hash, version and lexical state of each listed document that exists."""
        self._check_available()
        return {
            key: DocumentState(
                content_hash=document.content_hash, version=document.version, lexically_indexed=key not in self._outbox
            )
            for key in keys
            if (document := self._documents.get(key)) is not None
        }

    @asynccontextmanager
    async def lock_documents(self, keys: Sequence[DocumentKey]) -> AsyncIterator[None]:
        """Hold one asyncio lock per document (in sorted order, so two writers never deadlock)."""
        self._check_available()
        async with contextlib.AsyncExitStack() as stack:
            for key in sorted(set(keys)):
                await stack.enter_async_context(self._locks.setdefault(key, asyncio.Lock()))
            yield

    async def cached_embeddings(
        self, project_id: str, chunk_hashes: Sequence[str], *, model: str
    ) -> dict[str, list[float]]:
        """Return embeddings `project_id` already stores for these chunk hashes under `model` (hash -> vector)."""
        self._check_available()
        wanted = set(chunk_hashes)
        found: dict[str, list[float]] = {}
        for (stored_project, _), stored_chunks in self._chunks.items():
            if stored_project != project_id:
                continue
            for stored in stored_chunks.values():
                if stored.chunk.chunk_hash in wanted and stored.embedding_model == model:
                    found.setdefault(stored.chunk.chunk_hash, list(stored.embedding))
        return found

    async def save_documents(
        self,
        documents: Sequence[tuple[StoredDocument, Sequence[EmbeddedChunk]]],
        *,
        replacing: Mapping[DocumentKey, int] | None = None,
        restoring: RestoreFloor | None = None,
    ) -> SavedVersions:
        """Replace each document and its whole chunk set and queue it; all or nothing (`replacing` checked first)."""
        self._check_available()
        for key, read_version in (replacing or {}).items():
            current = self._documents.get(key)
            if (current.version if current is not None else 0) != read_version:
                raise VersionConflictError.changed_since_read(
                    key[1], read_version=read_version, current_version=current.version if current else None
                )
        versions: dict[DocumentKey, int] = {}
        created = {(d.project_id, d.document_id) for d, _ in documents} - self._documents.keys()
        for document, embedded_chunks in documents:
            key = (document.project_id, document.document_id)
            previous = self._documents.get(key)
            created_at = document.created_at if previous is None else previous.created_at
            # Counted per project, past the document's own version (as the PostgreSQL store counts them).
            generation = self._generations.get(key[0], 0)
            if restoring is not None and restoring.project_id == key[0] and generation == restoring.left:
                generation = restoring.before  # only the import wrote since it began: as if in one save
            counted = max(generation, previous.version if previous else 0) + 1
            versions[key] = max(counted, document.version)  # at least the version it carries (an import's)
            self._documents[key] = replace(
                document, chunks=(), lexically_indexed=False, created_at=created_at, version=versions[key]
            )
            old_chunks = self._chunks.get(key, {})
            new_chunks: dict[str, StoredChunk] = {}
            for embedded in embedded_chunks:
                chunk = replace(embedded.chunk, project_id=document.project_id, document_id=document.document_id)
                vector = tuple(float(x) for x in embedded.embedding)
                stored = StoredChunk(chunk, vector, embedded.embedding_model, lexically_indexed=False)
                old = old_chunks.get(chunk.chunk_id)
                unchanged = old is not None and replace(old, lexically_indexed=False) == stored
                new_chunks[chunk.chunk_id] = old if unchanged and old is not None else stored
            self._chunks[key] = new_chunks
            self._outbox.queue(key)
        self._bump({key[0] for key in versions})
        for (project_id, _), version in versions.items():
            self._generations[project_id] = max(self._generations[project_id], version)
        return SavedVersions(versions, frozenset(created), {key[0]: self._generations[key[0]] for key in versions})

    async def delete_document(self, project_id: str, document_id: str) -> bool:
        """Delete the document and its chunks and queue the lexical delete; False when it did not exist."""
        self._check_available()
        key = (project_id, document_id)
        if self._documents.pop(key, None) is None:
            return False
        self._chunks.pop(key, None)
        self._outbox.queue(key)
        self._bump({project_id})
        return True

    async def claim_outbox(self, *, limit: int) -> list[DocumentChunks]:
        """Lease up to `limit` queued documents no one holds, each with its current chunks, as PostgreSQL does.

        Projects take turns: every project's oldest change, oldest first, then every project's second (`CLAIM_QUEUED`).
        """
        self._check_available()
        return [
            DocumentChunks(project_id, document_id, self._ordered_chunks((project_id, document_id)), version)
            for (project_id, document_id), version in self._outbox.claim(limit=limit)
        ]

    async def release_outbox(self, documents: Sequence[DocumentChunks]) -> None:
        """End the lease of these claimed entries (only of the version each claimed)."""
        self._check_available()
        self._outbox.release(documents)

    async def complete_outbox(self, documents: Sequence[DocumentChunks]) -> None:
        """Dequeue entries at or below their claimed version and mark those documents' chunks indexed."""
        self._check_available()
        for key in self._outbox.complete(documents):
            chunks = self._chunks.get(key, {})
            self._chunks[key] = {
                chunk_id: replace(stored, lexically_indexed=True) for chunk_id, stored in chunks.items()
            }
        self._bump({document.project_id for document in documents})

    async def outbox_stats(self, *, through: int | None = None) -> OutboxStats:
        """Return how many documents await lexical indexing (queued by `through`), how long the oldest has waited."""
        self._check_available()
        return self._outbox.stats(through=through)

    async def project_generation(self, project_id: str) -> int:
        """Return the project's generation (0 until its first write)."""
        self._check_available()
        return self._generations.get(project_id, 0)

    async def document_titles(self, project_id: str, *, limit: int) -> list[str]:
        """Return the titles of at most `limit` of the project's documents."""
        self._check_available()
        own = sorted((d.document_id, d.title) for d in self._documents.values() if d.project_id == project_id)
        return [title for _, title in own[: max(limit, 0)]]

    async def existing_chunks(
        self, project_id: str, chunk_ids: Sequence[str], *, filters: Filters | None = None
    ) -> dict[str, str]:
        """Return chunk id -> chunk hash for those of `chunk_ids` the project holds now (meeting `filters`)."""
        self._check_available()
        wanted = set(chunk_ids)
        # As stored now: levels, tags, source, event times; the ids asked are these, the text the hash confirms.
        meeting = None if filters is None else replace(filters, chunk_ids=None, excluded_terms=())
        return {
            chunk_id: stored.chunk.chunk_hash
            for (chunk_project, _), stored_chunks in self._chunks.items()
            if chunk_project == project_id
            for chunk_id, stored in stored_chunks.items()
            if chunk_id in wanted and (meeting is None or chunk_matches(stored.chunk, meeting))
        }

    async def queue_project_for_reindex(self, project_id: str) -> int:
        """Queue every document of the project and mark its chunks not indexed; return how many documents."""
        self._check_available()
        keys = [key for key in self._documents if key[0] == project_id]
        for key in keys:
            self._outbox.queue(key)
            chunks = self._chunks.get(key, {})
            self._chunks[key] = {cid: replace(stored, lexically_indexed=False) for cid, stored in chunks.items()}
        return len(keys)

    async def list_documents(
        self, selection: DocumentSelection, *, after: str | None, limit: int
    ) -> list[DocumentSummary]:
        """Return up to `limit` selected documents by id, ids strictly after `after`."""
        self._check_available()
        return memory_catalog.list_documents(
            self._documents, self._chunks, selection, queued=self._outbox, after=after, limit=limit
        )

    async def embedded_documents(
        self, project_id: str, *, after: str | None, limit: int
    ) -> list[tuple[StoredDocument, list[EmbeddedChunk]]]:
        """Return up to `limit` documents with chunks and embeddings, by id after `after` (`ProjectSnapshot`'s)."""
        self._check_available()
        return memory_catalog.documents_with_embeddings(
            self._documents, self._chunks, project_id, after=after, limit=limit
        )

    @asynccontextmanager
    async def project_snapshot(self, project_id: str) -> AsyncIterator[InMemoryDocumentStore]:
        """The project at one moment: a copy of its documents and chunks, which later writes do not change."""
        self._check_available()
        snapshot = copy.copy(self)  # with containers of its own: writes to this store change none of them
        snapshot._documents = {key: value for key, value in self._documents.items() if key[0] == project_id}  # noqa: SLF001 - its own class
        snapshot._chunks = {key: dict(value) for key, value in self._chunks.items() if key[0] == project_id}  # noqa: SLF001 - its own class
        snapshot._outbox = self._outbox.copy()  # noqa: SLF001 - its own class
        yield snapshot

    async def delete_documents(self, selection: DocumentSelection) -> int:
        """Delete every selected document and its chunks, queue their lexical deletes; return how many."""
        self._check_available()
        keys = [key for key, document in self._documents.items() if document_selected(document, selection)]
        for key in keys:
            del self._documents[key]
            self._chunks.pop(key, None)
            self._outbox.queue(key)
        if keys:
            self._bump({selection.project_id})
        return len(keys)

    async def project_stats(self, project_id: str) -> ProjectStats:
        """Return the project's counts and lexical backlog; all zeros when unknown."""
        self._check_available()
        pending, oldest_pending_age_s = self._outbox.project_backlog(project_id)
        return memory_catalog.project_stats(
            self._documents, self._chunks, project_id, pending=pending, oldest_pending_age_s=oldest_pending_age_s
        )

    async def project_ids(self, *, among: Collection[str] | None = None) -> list[str]:
        """Return the id of every project that holds at least one document (of `among`, when given), sorted."""
        self._check_available()
        return sorted({project_id for project_id, _ in self._documents if among is None or project_id in among})

    async def ping(self) -> None:
        """Return, or raise `EngineUnavailableError` when marked unavailable."""
        self._check_available()

    def is_lexically_indexed(self, project_id: str, chunk_id: str) -> bool | None:
        """The chunk's indexed flag (None when there is no such chunk); for tests of the outbox."""
        for (chunk_project, _), stored_chunks in self._chunks.items():
            if chunk_project == project_id and chunk_id in stored_chunks:
                return stored_chunks[chunk_id].lexically_indexed
        return None

    def _bump(self, project_ids: set[str]) -> None:
        for project_id in project_ids:
            self._generations[project_id] = self._generations.get(project_id, 0) + 1

    def _ordered_chunks(self, key: DocumentKey) -> tuple[Chunk, ...]:
        stored_chunks = self._chunks.get(key, {}).values()
        return tuple(
            stored.chunk for stored in sorted(stored_chunks, key=lambda s: (s.chunk.position, s.chunk.chunk_id))
        )
