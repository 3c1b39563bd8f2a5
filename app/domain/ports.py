"""Ports: what the use cases need from engines. Adapters in `app/engines/` satisfy them structurally.

Contracts shared by every port:
- Scores are similarities, higher is better; hit lists are best first.
- Every call is scoped to one project: nothing of another project is ever returned or changed.
- Failures raise `EngineError` subclasses (`EngineUnavailableError`, `EngineTimeoutError`) naming
  the adapter; driver exceptions never cross the port.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping, Sequence
    from contextlib import AbstractAsyncContextManager

    from app.domain.catalog import DocumentSelection, DocumentSummary, ProjectStats
    from app.domain.document_versions import DocumentKey, DocumentState, RestoreFloor, SavedVersions
    from app.domain.models import (
        DocumentChunks,
        EmbeddedChunk,
        Filters,
        FusedHit,
        LexicalQuery,
        OutboxStats,
        RerankQuery,
        ScoredHit,
        StoredDocument,
    )


class Embedder(Protocol):
    """Turns text into unit-length embeddings of a fixed dimension."""

    name: str
    model_name: str
    dimensions: int

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed passages in order, one unit-length vector of `dimensions` floats per text."""
        ...

    async def embed_query(self, text: str, *, scope: str = "") -> list[float]:
        """Embed one query; the vector is comparable by cosine with `embed_documents` output.

        `scope` (a project id) partitions whatever the adapter remembers of earlier queries: a vector cached
        for one project's query must not answer another's, whose caller would see it come back at once
        (`embed` 0 ms) and learn that someone searched that text.
        """
        ...

    async def embed_queries(self, texts: Sequence[str], *, scope: str = "") -> list[list[float]]:
        """Embed several queries in one batch, in order; each vector is what `embed_query` gives (to float rounding)."""
        ...


class VectorIndex(Protocol):
    """Nearest-neighbour search over chunk embeddings."""

    name: str

    async def search(self, embedding: Sequence[float], *, top_k: int, filters: Filters) -> list[ScoredHit]:
        """Return at most `top_k` chunks matching `filters`, best first; `score` is cosine similarity."""
        ...

    async def ping(self) -> None:
        """Return when the store answers; raise `EngineUnavailableError` otherwise."""
        ...


class VectorRead(Protocol):
    """One snapshot of one project's chunks, opened before the query's embedding is known.

    A search and the confirmation of other chunks (`ChunkTruth.existing_chunks`) read the same snapshot, so
    they agree. Calls may be made from concurrent tasks: they run one at a time, in the order made.
    """

    @property
    def began(self) -> bool:
        """Whether the read holds its snapshot already; one that does not takes it at its first call."""
        ...

    async def search(self, embedding: Sequence[float], *, top_k: int, filters: Filters) -> list[ScoredHit]:
        """`VectorIndex.search` in this snapshot; `filters` name the read's project."""
        ...

    async def existing_chunks(
        self, project_id: str, chunk_ids: Sequence[str], *, filters: Filters | None = None
    ) -> dict[str, str]:
        """`ChunkTruth.existing_chunks` in this snapshot; `project_id` is the read's project."""
        ...


@runtime_checkable
class ConfirmingVectorIndex(VectorIndex, Protocol):
    """A vector index over the source of truth's own chunk rows (pgvector reads `chunks`).

    So a search can open its read of the store while it embeds the query, and confirm the lexical hits in
    that read: one round of the store per hybrid search instead of two (`app.retrieval.searcher`).
    """

    def read(self, project_id: str) -> AbstractAsyncContextManager[VectorRead]:
        """A read of the project's chunks, open from entry to exit (`VectorRead`).

        Raises `EngineError` at entry when the store cannot be read; a call made with another project's
        filters raises `ValueError`.
        """
        ...


class LexicalIndex(Protocol):
    """BM25 search over chunk text, section title, breadcrumb and source."""

    name: str

    async def search(self, query: LexicalQuery, *, top_k: int, filters: Filters) -> list[ScoredHit]:
        """Return at most `top_k` chunks matching `query` and `filters`, best first by BM25.

        Phrases must occur verbatim (after analysis); a chunk containing an excluded term never
        matches. Text that looks like query syntax (`:`, `(`, `*`, `~`, unbalanced quotes) is searched
        as plain words and never raises. A query with no searchable term returns no hits.
        """
        ...

    async def replace_documents(self, documents: Sequence[DocumentChunks]) -> None:
        """Make each listed document's indexed chunks exactly `chunks` (none: delete it), durably.

        Idempotent: applying the same batch twice leaves the index as applying it once. An empty batch
        writes nothing; the outbox sends one when idle, so an adapter may check its index is intact then.
        """
        ...

    async def delete_project(self, project_id: str) -> None:
        """Remove every chunk of the project (used before a rebuild from the source of truth)."""
        ...

    async def ping(self) -> None:
        """Return when the index answers; raise `EngineUnavailableError` otherwise."""
        ...


class Reranker(Protocol):
    """The second stage: re-scores the fused top candidates of one query with more evidence than fusion had."""

    name: str

    async def rerank(self, query: RerankQuery, candidates: Sequence[FusedHit]) -> list[FusedHit]:
        """Return exactly `candidates`, each with `rerank_score` set (higher is better), best first.

        Never drops, duplicates or invents a hit, and leaves every other field of a hit as it was.
        Deterministic: the same query and candidates give the same scores and order. Stable: hits with
        equal scores keep their order in `candidates` (the fused order). Candidates come best first by
        fusion, carrying both legs' ranks and raw scores; an empty list gives an empty list.
        """
        ...


class ChunkTruth(Protocol):
    """What the searcher asks the source of truth: which chunks exist now, as which content."""

    async def existing_chunks(
        self, project_id: str, chunk_ids: Sequence[str], *, filters: Filters | None = None
    ) -> dict[str, str]:
        """Return chunk id -> chunk hash for those of `chunk_ids` the project holds now (deleted ones are absent).

        With `filters` (of the same project), only chunks whose stored row meets them now: levels, tags,
        source, event times (not `filters.chunk_ids` nor excluded terms). A lexical index that has not yet
        caught up with a document's new tags would otherwise return it for its old ones.
        """
        ...


class DocumentTitles(Protocol):
    """What the search service reads of a project's document titles: which names many of its documents share."""

    async def document_titles(self, project_id: str, *, limit: int) -> list[str]:
        """Return the titles of at most `limit` of the project's documents.

        One entry per document (however many chunks it has), the first `limit` by document id, so that
        every replica reads the same ones; an unknown project gives an empty list.
        """
        ...


class ProjectSnapshot(Protocol):
    """One project's documents as they stood at one moment (`DocumentStore.project_snapshot`).

    `list_documents` reads as `DocumentStore.list_documents` does; both read that moment, of the project alone.
    """

    async def list_documents(
        self, selection: DocumentSelection, *, after: str | None, limit: int
    ) -> list[DocumentSummary]:
        """As `DocumentStore.list_documents`."""
        ...

    async def embedded_documents(
        self, project_id: str, *, after: str | None, limit: int
    ) -> list[tuple[StoredDocument, list[EmbeddedChunk]]]:
        """Return up to `limit` documents with their chunks and stored embeddings, by id after `after` (export).

        Each pair is what `DocumentStore.save_documents` takes, so writing it back reproduces the document
        without embedding.
        """
        ...


class DocumentStore(ChunkTruth, DocumentTitles, Protocol):
    """The source of truth for documents, chunks, embeddings and the lexical outbox.

    It answers what the searcher checks (`ChunkTruth.existing_chunks`) and what the search service reads of
    titles (`DocumentTitles.document_titles`), as declared there.
    """

    name: str

    async def get_document(self, project_id: str, document_id: str) -> StoredDocument | None:
        """Return the document with its chunks in position order, or None."""
        ...

    async def document_states(self, keys: Sequence[DocumentKey]) -> dict[DocumentKey, DocumentState]:
        """Return the content hash, version and lexical state of each listed document that exists (absent: left out).

        `lexically_indexed` is `get_document`'s: the outbox may turn it true while a lock is held, never false.
        """
        ...

    def lock_documents(self, keys: Sequence[DocumentKey]) -> AbstractAsyncContextManager[None]:
        """Hold these documents for one writer for the block; other writers of any of them wait for it.

        Every process writing to the store takes the same locks, so writes of one document serialize in
        the order they asked, and a read of `document_states` inside the block stays true until its end.
        """
        ...

    async def cached_embeddings(
        self, project_id: str, chunk_hashes: Sequence[str], *, model: str
    ) -> dict[str, list[float]]:
        """Return embeddings `project_id` already stores for these chunk hashes under `model` (hash -> vector).

        Never another project's: whether a chunk is already stored (and so not embedded again) must not
        tell a tenant what another one holds.
        """
        ...

    async def save_documents(
        self,
        documents: Sequence[tuple[StoredDocument, Sequence[EmbeddedChunk]]],
        *,
        replacing: Mapping[DocumentKey, int] | None = None,
        restoring: RestoreFloor | None = None,
    ) -> SavedVersions:
        """Atomically replace each document and its whole chunk set, and queue it for lexical indexing.

        Either every listed document is written with all its chunks, or nothing is. The new chunks
        are marked not yet lexically indexed and an outbox entry is recorded in the same transaction,
        and the projects' generations move on. Returns each document's new version (versions only grow):
        past the stored one and the project's generation, and at least the document's own `version` (0 from
        ingest; an import's, so that an `If-Match` read before the move never names other content); and,
        as `created`, the documents that were not stored when the save ran (a caller's earlier read may
        have found one that a delete by selection removed since).
        `replacing` names, for conditional writes, the version each document must still be stored at (0:
        absent), checked atomically with the write: a delete by selection or of the project takes no document
        lock, so it may have run since the caller's check. Otherwise `VersionConflictError`, nothing written.
        `restoring` (an import's later saves): while its project's generation is still `restoring.left`, a
        document new to it is counted past `restoring.before` instead of past the generation; the generation
        still moves on and reaches every version given, and `generations` says where it stands after the save.
        """
        ...

    async def delete_document(self, project_id: str, document_id: str) -> bool:
        """Delete the document and its chunks, queue the lexical delete, move the project's generation on.

        False when it did not exist.
        """
        ...

    async def claim_outbox(self, *, limit: int) -> list[DocumentChunks]:
        """Lease up to `limit` documents awaiting lexical indexing that no other worker holds, with their chunks.

        Projects take turns: each project's oldest change, oldest first, then each one's second, and so on,
        so one project's backlog never holds another's writes back. Workers in any number of processes may
        claim at once: none gets another's entries while its lease lasts; entries of a claimer that died come
        back when the lease runs out.
        Each entry carries `outbox_version`; its chunks are at least as new as that version.
        """
        ...

    async def release_outbox(self, documents: Sequence[DocumentChunks]) -> None:
        """Give claimed entries back before their lease ends (indexing them failed)."""
        ...

    async def complete_outbox(self, documents: Sequence[DocumentChunks]) -> None:
        """Mark these documents' chunks lexically indexed, drop their outbox entries, move generations on.

        An entry recorded after `claim_outbox` read the document stays queued.
        """
        ...

    async def outbox_stats(self, *, through: int | None = None) -> OutboxStats:
        """Return how many documents await lexical indexing and how long the oldest has waited.

        With `through`, `backlog` counts only changes queued at or before that outbox version.
        """
        ...

    async def project_generation(self, project_id: str) -> int:
        """Return the project's generation: it moves on with every write that changes its search answers.

        Read by every replica to key its query cache, so none serves an answer from before a write.
        """
        ...

    async def queue_project_for_reindex(self, project_id: str) -> int:
        """Queue every document of the project for lexical indexing; return how many."""
        ...

    async def list_documents(
        self, selection: DocumentSelection, *, after: str | None, limit: int
    ) -> list[DocumentSummary]:
        """Return up to `limit` selected documents of the project, by document id, ids strictly after `after`.

        Ordered by id (code point order), so paging with the last id seen never repeats or skips a
        document that exists throughout. An unknown project lists nothing.
        """
        ...

    def project_snapshot(self, project_id: str) -> AbstractAsyncContextManager[ProjectSnapshot]:
        """Read the project as it stood at one moment: every read through the snapshot sees that moment.

        Pages read one by one from the store itself each see their own moment, so a document created behind
        the pages already read and one deleted ahead of them were both missing (a state that never existed).
        Writes go on meanwhile and are not seen; leaving the context ends the snapshot and frees what it holds.
        """
        ...

    async def delete_documents(self, selection: DocumentSelection) -> int:
        """Delete every selected document with its chunks in one transaction; return how many.

        Queues the lexical delete of each through the outbox and moves the project's generation on, as
        `delete_document` does; deleting nothing changes nothing.
        """
        ...

    async def project_stats(self, project_id: str) -> ProjectStats:
        """Return the project's document and chunk counts and its lexical backlog; all zeros when unknown."""
        ...

    async def project_ids(self, *, among: Collection[str] | None = None) -> list[str]:
        """Return the id of every project that holds at least one document, sorted.

        With `among`, only those of these projects: the store reads their rows alone (the listing of a
        token naming projects never reads another project's; none for an empty `among`).
        """
        ...

    async def ping(self) -> None:
        """Return when the store answers; raise `EngineUnavailableError` otherwise."""
        ...
