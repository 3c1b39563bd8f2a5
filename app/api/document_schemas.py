"""Wire shapes (msgspec Structs) of the document endpoints and their mapping to and from domain values."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

import msgspec

from app.config import MAX_BATCH_DOCUMENTS_CEILING
from app.domain.errors import InvalidInputError
from app.domain.models import Chunk, Document, StoredDocument
from app.domain.moments import as_utc
from app.domain.tags import MAX_DOCUMENT_TAGS, MAX_TAG_CHARS, MAX_TITLE_CHARS, distinct_tags
from app.ingestion.front_matter import front_matter_fields

MAX_CONTEXT_CHARS = 8192
DocumentId = Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
Tag = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_TAG_CHARS)]
"""A tag as a document carries it, and so as a search filter can name it."""


class DocumentIn(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """One document to ingest. `markdown` is accepted as a synonym of `text`; an unknown field is a 400.

    `context` is text that helps find the document without being part of it (e.g. a conversation's
    previous turn): embedded and indexed with every chunk, returned by `GET` of the document, never as
    a chunk's text. A leading YAML front matter block (`---`, `key: value` lines with a known key such as
    `title`, `tags`, `date`, `---`) is not chunked: its `title`, `tags` and ISO 8601 `date` fill the fields
    the request leaves empty (`event_time` for `date`), and its fields join `metadata` (the request's keys
    win), as `poimen ingest` reads a file's. A `---` block of prose is text.
    """

    id: DocumentId
    text: str | None = None
    markdown: str | None = None
    source: Annotated[str, msgspec.Meta(max_length=1024)] = ""
    title: Annotated[str, msgspec.Meta(max_length=MAX_TITLE_CHARS)] = ""
    tags: Annotated[list[Tag], msgspec.Meta(max_length=MAX_DOCUMENT_TAGS)] = []
    event_time: datetime | None = None
    metadata: dict[str, Any] = {}
    context: Annotated[str, msgspec.Meta(max_length=MAX_CONTEXT_CHARS)] = ""
    expected_version: Annotated[int, msgspec.Meta(ge=0)] | None = None
    """Write only if the stored version is this one (0: only if the document does not exist yet); else 409."""

    def body(self) -> str:
        """The document's text, whichever field carried it; both given is an `InvalidInputError`."""
        if self.text is not None and self.markdown is not None:
            # Which one was meant? Taking one silently dropped the other.
            msg = f"document {self.id!r}: give text or markdown, not both"
            raise InvalidInputError(msg, field="markdown")
        return self.text if self.text is not None else (self.markdown or "")

    def to_domain(self, project_id: str) -> Document:
        """The domain document; naive event times are taken as UTC. Front matter fills what is not given."""
        text = self.body()
        front = front_matter_fields(text)
        return Document(
            project_id=project_id,
            document_id=self.id,
            source=self.source or self.id,
            title=self.title or front.title or "",
            text=text,
            tags=distinct_tags(self.tags) or front.tags,
            event_time=as_utc(self.event_time) or front.event_time,
            metadata={**front.metadata, **self.metadata} if front.metadata else self.metadata,
            context=self.context,
        )


class DocumentBatchIn(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Several documents in one request; written atomically."""

    # The setting (`MAX_BATCH_DOCUMENTS`) is checked after decoding; the schema bounds the decoding itself.
    documents: Annotated[list[DocumentIn], msgspec.Meta(min_length=1, max_length=MAX_BATCH_DOCUMENTS_CEILING)]


class IngestOutcomeOut(msgspec.Struct, kw_only=True):
    """What happened to one document."""

    id: str
    status: Literal["created", "updated", "unchanged"]
    chunks: int
    embedded: int
    """Chunks embedded for this write; the others reused an embedding this project already stores for the same text."""
    version: int


class IngestResponse(msgspec.Struct, kw_only=True):
    """The answer to an ingest: every document is committed to PostgreSQL when this is sent."""

    project: str
    documents: list[IngestOutcomeOut]


class ChunkOut(msgspec.Struct, kw_only=True):
    """A stored chunk."""

    id: str
    position: int
    text: str
    breadcrumb: list[str]
    section_title: str
    level: str
    tags: list[str]
    event_time: datetime | None
    chunk_hash: str


class DocumentOut(msgspec.Struct, kw_only=True):
    """A stored document with its chunks in order."""

    id: str
    project: str
    source: str
    title: str
    tags: list[str]
    event_time: datetime | None
    metadata: dict[str, Any]
    context: str
    content_hash: str
    lexically_indexed: bool
    created_at: datetime
    updated_at: datetime
    version: int
    chunks: list[ChunkOut]


def chunk_out(chunk: Chunk) -> ChunkOut:
    """Wire shape of a chunk."""
    return ChunkOut(
        id=chunk.chunk_id,
        position=chunk.position,
        text=chunk.text,
        breadcrumb=list(chunk.breadcrumb),
        section_title=chunk.section_title,
        level=chunk.level,
        tags=list(chunk.tags),
        event_time=chunk.event_time,
        chunk_hash=chunk.chunk_hash,
    )


def document_out(document: StoredDocument) -> DocumentOut:
    """Wire shape of a stored document."""
    return DocumentOut(
        id=document.document_id,
        project=document.project_id,
        source=document.source,
        title=document.title,
        tags=list(document.tags),
        event_time=document.event_time,
        metadata=dict(document.metadata),
        # Every chunk carries the document's context (the store keeps it per chunk).
        context=document.chunks[0].context if document.chunks else "",
        content_hash=document.content_hash,
        lexically_indexed=document.lexically_indexed,
        created_at=document.created_at,
        updated_at=document.updated_at,
        version=document.version,
        chunks=[chunk_out(chunk) for chunk in document.chunks],
    )
