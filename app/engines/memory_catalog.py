"""What the memory-management use cases read of `InMemoryDocumentStore`'s tables: listings, export pages, stats.

The in-memory counterpart of `app.engines.postgres_catalog`'s reads: pure functions of the store's documents
and chunks (`app.engines.memory`), which calls them after its availability check. Documents are ordered by id
in code point order, the order PostgreSQL's `COLLATE "C"` gives, so the fake pages exactly like PostgreSQL.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from app.domain.catalog import DocumentSummary, ProjectStats
from app.domain.models import EmbeddedChunk
from app.engines.memory_filters import document_selected

if TYPE_CHECKING:
    from collections.abc import Container, Mapping

    from app.domain.catalog import DocumentSelection
    from app.domain.document_versions import DocumentKey
    from app.domain.models import StoredDocument
    from app.engines.memory import StoredChunk


def list_documents(  # noqa: PLR0913 - the store's two tables and its outbox, then the selection and the page
    documents: Mapping[DocumentKey, StoredDocument],
    chunks: Mapping[DocumentKey, Mapping[str, StoredChunk]],
    selection: DocumentSelection,
    *,
    queued: Container[DocumentKey],
    after: str | None,
    limit: int,
) -> list[DocumentSummary]:
    """Up to `limit` selected documents by id, ids strictly after `after`; a `queued` one is not lexically indexed."""
    selected = sorted(
        (key, document)
        for key, document in documents.items()
        if document_selected(document, selection) and (after is None or key[1] > after)
    )
    return [
        DocumentSummary(
            document_id=document.document_id,
            source=document.source,
            title=document.title,
            tags=document.tags,
            event_time=document.event_time,
            chunk_count=len(chunks.get(key, {})),
            version=document.version,
            lexically_indexed=key not in queued,
            created_at=document.created_at,
            updated_at=document.updated_at,
        )
        for key, document in selected[: max(limit, 0)]
    ]


def documents_with_embeddings(
    documents: Mapping[DocumentKey, StoredDocument],
    chunks: Mapping[DocumentKey, Mapping[str, StoredChunk]],
    project_id: str,
    *,
    after: str | None,
    limit: int,
) -> list[tuple[StoredDocument, list[EmbeddedChunk]]]:
    """Up to `limit` of the project's documents by id after `after`, with their chunks and embeddings (export).

    Chunks are in position order; each pair is what `save_documents` takes back.
    """
    keys = sorted(key for key in documents if key[0] == project_id and (after is None or key[1] > after))
    exported = []
    for key in keys[: max(limit, 0)]:
        stored_chunks = sorted(chunks.get(key, {}).values(), key=lambda s: (s.chunk.position, s.chunk.chunk_id))
        document = replace(documents[key], chunks=tuple(s.chunk for s in stored_chunks))
        exported.append(
            (document, [EmbeddedChunk(s.chunk, list(s.embedding), s.embedding_model) for s in stored_chunks])
        )
    return exported


def project_stats(
    documents: Mapping[DocumentKey, StoredDocument],
    chunks: Mapping[DocumentKey, Mapping[str, StoredChunk]],
    project_id: str,
    *,
    pending: int,
    oldest_pending_age_s: float,
) -> ProjectStats:
    """The project's counts, with its lexical backlog as the outbox gives it; all zeros when unknown."""
    project_chunks = [stored for key, by_id in chunks.items() if key[0] == project_id for stored in by_id.values()]
    project_documents = [document for key, document in documents.items() if key[0] == project_id]
    return ProjectStats(
        project_id=project_id,
        documents=len(project_documents),
        chunks=len(project_chunks),
        lexically_indexed=sum(stored.lexically_indexed for stored in project_chunks),
        pending=pending,
        oldest_pending_age_s=oldest_pending_age_s,
        last_write_at=max((document.updated_at for document in project_documents), default=None),
    )
