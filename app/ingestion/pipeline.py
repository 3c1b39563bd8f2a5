"""Ingestion: validate documents, chunk them, embed what is new, and store each batch atomically.

Idempotent by content hash: a document whose stored hash matches is neither written nor embedded,
and a chunk whose embedded text was embedded before under the same model reuses that vector. The
lexical index is fed afterwards from the store's outbox (`app.ingestion.outbox.OutboxWorker`).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Final, Literal

from app.domain.errors import DocumentTooLargeError, InvalidInputError, VersionConflictError
from app.domain.models import Chunk, Document, EmbeddedChunk, StoredDocument
from app.domain.text_forms import canonical_document
from app.ingestion.admission import Allowance
from app.ingestion.chunk_embeddings import ChunkEmbeddings
from app.ingestion.chunking import ChunkingPolicy, chunk_markdown
from app.ingestion.content_hashes import chunk_hash, content_hash, embedding_text
from app.ingestion.expected_versions import check_expected_version, check_expected_versions
from app.ingestion.validation import validate_documents

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from app.domain.document_versions import DocumentKey, DocumentState
    from app.domain.ports import DocumentStore, Embedder

IngestStatus = Literal["created", "updated", "unchanged"]

MAX_CHUNKS_PER_DOCUMENT: Final = 10_000
"""Most chunks one document may split into, each an embedding, a row and an index entry. A document at
MAX_DOCUMENT_BYTES of prose makes about 3,800; 5.5 MB of one-line sections under alternating `#` and `##`
headings (which never merge) made 225,000: about half an hour of embedding on two cores for one request."""
MAX_CHUNKS_PER_REQUEST: Final = 12_000
"""Most chunks one ingest call may make, and a process embeds and writes at once (others wait): each holds ~27 KiB
until the write; 46,000 (64 MiB of prose) took a replica to 2 GiB (docs/operations.md "Memory per pod")."""


@dataclass(frozen=True, slots=True)
class IngestOutcome:
    """What happened to one document of a batch.

    `embedded_count` counts the texts this call embedded for the document: chunks whose embedding
    was cached, or already embedded for an earlier document of the same batch, are not counted.
    """

    document_id: str
    status: IngestStatus
    chunk_count: int
    embedded_count: int
    version: int
    """The document's version after this call (unchanged documents keep theirs)."""
    lexically_indexed: bool
    """Whether the lexical index has this version: never yet for one this call wrote (the outbox follows)."""


class IngestionPipeline:
    """Chunk, embed and store documents; the store's outbox then feeds the lexical index.

    Embedding is batched across all documents of one `ingest` call, so throughput stays close to
    the bare model's. `on_written(project_id)` runs after each successful write or delete of a
    project (cache invalidation, waking the outbox worker).
    """

    def __init__(  # noqa: PLR0913 - each collaborator and knob is named at the composition root
        self,
        *,
        store: DocumentStore,
        embedder: Embedder,
        policy: ChunkingPolicy,
        embed_batch_size: int = 256,
        embed_timeout_s: float = 60.0,
        on_written: Callable[[str], None] | None = None,
    ) -> None:
        if embed_batch_size < 1:
            msg = f"embed_batch_size must be at least 1, got {embed_batch_size}"
            raise ValueError(msg)
        if embed_timeout_s <= 0:
            msg = f"embed_timeout_s must be positive, got {embed_timeout_s}"
            raise ValueError(msg)
        self._store, self._embedder = store, embedder
        self.policy = policy
        self._embeddings = ChunkEmbeddings(
            store=store, embedder=embedder, batch_size=embed_batch_size, timeout_s=embed_timeout_s
        )
        self._on_written = on_written
        self._chunks_in_flight = Allowance(MAX_CHUNKS_PER_REQUEST)

    def chunk(self, document: Document) -> list[Chunk]:
        """The chunks `document` is stored as: ids `<document_id>#<position>`, hashes of `embedding_text`."""
        drafts = chunk_markdown(
            title=document.title,
            text=document.text,
            max_chars=self.policy.max_chars,
            overlap_chars=self.policy.overlap_chars,
            min_chars=self.policy.min_chars,
        )
        chunks = []
        for draft in drafts:
            chunk = Chunk(
                chunk_id=f"{document.document_id}#{draft.position}",
                document_id=document.document_id,
                project_id=document.project_id,
                text=draft.text,
                source=document.source,
                level=draft.level,
                breadcrumb=draft.breadcrumb,
                section_title=draft.section_title,
                position=draft.position,
                tags=document.tags,
                event_time=document.event_time,
                context=document.context,
            )
            chunks.append(_with_hash(chunk))
        return chunks

    async def ingest(
        self, documents: Sequence[Document], *, expected_versions: Mapping[str, int] | None = None
    ) -> list[IngestOutcome]:
        """Store every new or changed document of the batch in one atomic write; outcomes in input order.

        The batch's documents are locked in the store for the whole call (`lock_documents`), so
        concurrent writes of one document, from any process, apply in the order they asked and a
        delete is never undone by a write that began before it. `expected_versions` maps document ids
        to the version the caller last saw (0: must not exist yet).

        Raises:
            InvalidInputError: the batch fails `validate_documents`, or a document yields no chunk.
            VersionConflictError: a stored version differs from the expected one, also when a delete by
                selection or of the project (which takes no document lock) removed it while this call
                embedded; nothing was written.
            EngineError: the store or the embedder failed; nothing of the batch was written.
        """
        # Stored in NFC: what was sent decomposed is found by a query typed precomposed, and hashes alike.
        documents = [canonical_document(document) for document in documents]
        validate_documents(documents)
        if not documents:
            return []
        keys = [(document.project_id, document.document_id) for document in documents]
        async with self._store.lock_documents(keys):
            states = await self._store.document_states(keys)
            check_expected_versions(documents, states, expected := expected_versions or {})
            # Checked again in the save's transaction: a delete by selection takes no document lock.
            replacing = {key: state.version if (state := states.get(key)) else 0 for key in keys if key[1] in expected}
            outcomes = await self._write(documents, states, replacing)
        self._notify(
            {
                document.project_id
                for document, outcome in zip(documents, outcomes, strict=True)
                if outcome.status != "unchanged"
            }
        )
        return outcomes

    async def _write(
        self,
        documents: Sequence[Document],
        states: Mapping[DocumentKey, DocumentState],
        replacing: Mapping[DocumentKey, int],
    ) -> list[IngestOutcome]:
        stored_hashes = [
            state.content_hash if (state := states.get((document.project_id, document.document_id))) else None
            for document in documents
        ]
        # Chunking a large batch takes CPU time; a worker thread keeps the event loop answering.
        plans = await asyncio.to_thread(self._plan, documents, stored_hashes)
        changed = [plan for plan in plans if plan.status != "unchanged"]
        for plan in changed:
            if not plan.chunks:
                msg = f"document {plan.document.document_id!r} has no text outside front matter"
                raise InvalidInputError(msg, field="text", document_id=plan.document.document_id)
            if len(plan.chunks) > MAX_CHUNKS_PER_DOCUMENT:
                msg = (
                    f"document {plan.document.document_id!r} splits into {len(plan.chunks)} chunks; at most "
                    f"{MAX_CHUNKS_PER_DOCUMENT} (many tiny sections under alternating headings: split the document)"
                )
                raise DocumentTooLargeError(msg, field="text", document_id=plan.document.document_id)
        if (total := sum(len(plan.chunks) for plan in changed)) > MAX_CHUNKS_PER_REQUEST:
            msg = (
                f"the documents split into {total} chunks; at most {MAX_CHUNKS_PER_REQUEST} in one request (or CLI "
                "batch): send fewer documents at once"
            )
            raise DocumentTooLargeError(msg, field="documents")
        async with self._chunks_in_flight.take(total):
            return await self._embed_and_save(plans, changed, states, replacing)

    async def _embed_and_save(
        self,
        plans: Sequence[_DocumentPlan],
        changed: Sequence[_DocumentPlan],
        states: Mapping[DocumentKey, DocumentState],
        replacing: Mapping[DocumentKey, int],
    ) -> list[IngestOutcome]:
        model = self._embedder.model_name
        vectors, embedded_by = await self._embeddings.embed([chunk for plan in changed for chunk in plan.chunks])
        versions = {key: state.version for key, state in states.items()}
        created: frozenset[DocumentKey] = frozenset()
        if changed:
            now = datetime.now(UTC)
            writes = [
                (
                    _stored_document(plan, now),
                    [
                        EmbeddedChunk(chunk=chunk, embedding=vectors[chunk.chunk_hash], embedding_model=model)
                        for chunk in plan.chunks
                    ],
                )
                for plan in changed
            ]
            saved = await self._store.save_documents(writes, replacing=replacing)
            versions.update(saved)
            created = saved.created
        outcomes = []
        for plan in plans:
            key = (plan.document.project_id, plan.document.document_id)
            # Found stored, then removed by a delete by selection (no document lock) before the save: a new one.
            status: IngestStatus = "created" if key in created else plan.status
            outcomes.append(
                IngestOutcome(
                    document_id=plan.document.document_id,
                    status=status,
                    chunk_count=len(plan.chunks),
                    embedded_count=embedded_by.get(key, 0),
                    version=versions.get(key, 0),
                    lexically_indexed=status == "unchanged" and states[key].lexically_indexed,
                )
            )
        return outcomes

    def _plan(self, documents: Sequence[Document], stored_hashes: Sequence[str | None]) -> list[_DocumentPlan]:
        model = self._embedder.model_name
        return [
            _DocumentPlan(
                document=document,
                content_hash=content_hash(document, policy=self.policy, embedding_model=model),
                stored_hash=stored_hash,
                chunks=self.chunk(document),
            )
            for document, stored_hash in zip(documents, stored_hashes, strict=True)
        ]

    async def delete(self, project_id: str, document_id: str, *, expected_version: int | None = None) -> bool:
        """Delete a document and queue its lexical removal; False when it did not exist.

        Takes the document's lock like `ingest`, so a write that began earlier finishes first and a
        later one finds the document gone. Raises `VersionConflictError` when `expected_version` is
        given and differs from the stored one (`ANY_VERSION`: when the document does not exist), also
        when a delete by selection (which takes no document lock) removed it after that check.
        """
        key = (project_id, document_id)
        async with self._store.lock_documents([key]):
            state = None if expected_version is None else (await self._store.document_states([key])).get(key)
            if expected_version is not None:
                check_expected_version(document_id, state, expected_version)
            deleted = await self._store.delete_document(project_id, document_id)
        if not deleted and state is not None:
            raise VersionConflictError.changed_since_read(document_id, read_version=state.version, current_version=None)
        if deleted:
            self._notify({project_id})
        return deleted

    def _notify(self, project_ids: set[str]) -> None:
        if self._on_written is None:
            return
        for project_id in sorted(project_ids):
            self._on_written(project_id)


@dataclass(frozen=True, slots=True)
class _DocumentPlan:
    document: Document
    content_hash: str
    stored_hash: str | None
    chunks: list[Chunk]

    @property
    def status(self) -> IngestStatus:
        if self.stored_hash is None:
            return "created"
        return "unchanged" if self.stored_hash == self.content_hash else "updated"


def _with_hash(chunk: Chunk) -> Chunk:
    return replace(chunk, chunk_hash=chunk_hash(embedding_text(chunk)))


def _stored_document(plan: _DocumentPlan, now: datetime) -> StoredDocument:
    """The row to write; the store keeps the original `created_at` when it replaces a document."""
    document = plan.document
    return StoredDocument(
        project_id=document.project_id,
        document_id=document.document_id,
        source=document.source,
        title=document.title,
        content_hash=plan.content_hash,
        tags=document.tags,
        event_time=document.event_time,
        metadata=document.metadata,
        chunks=tuple(plan.chunks),
        lexically_indexed=False,
        created_at=now,
        updated_at=now,
    )
