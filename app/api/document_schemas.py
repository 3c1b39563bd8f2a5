"""Wire shapes (msgspec Structs) of the document endpoints and their mapping to and from domain values."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, ClassVar, Final, Literal

import msgspec

from app.api.microsecond_times import TimePaths
from app.config import MAX_BATCH_DOCUMENTS_CEILING
from app.domain.errors import InvalidInputError
from app.domain.models import Chunk, Document, StoredDocument
from app.domain.moments import as_utc
from app.domain.tags import MAX_DOCUMENT_TAGS, MAX_TAG_CHARS, MAX_TITLE_CHARS, distinct_tags
from app.ingestion.front_matter import front_matter_fields
from app.ingestion.titles import document_title

MAX_CONTEXT_CHARS = 8192
DocumentId = Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
Tag = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_TAG_CHARS)]
"""A tag as a document carries it, and so as a search filter can name it."""


ID_DESCRIPTION: Final = (
    "Kept byte for byte; may hold `/` (read as a path), but no empty, `.` or `..` part between slashes (a 400:"
    " its URL could not reach it)"
)
TEXT_DESCRIPTION: Final = (
    "The document's markdown (or `markdown`): not empty nor only white space, no NUL. Stored in Unicode NFC, with"
    " soft hyphens, zero-width spaces, word joiners and U+FEFF dropped"
)
"""`app.api.openapi_document` adds this server's size limit (`MAX_DOCUMENT_BYTES`)."""
SOURCE_DESCRIPTION: Final = "Where the document came from (a path, a URL); the id when empty. Kept byte for byte"
TAGS_DESCRIPTION: Final = (
    "Kept as written in NFC, white space around each dropped, matched without regard to case: tags differing"
    " only in case are stored once, as first spelt. A blank tag is a 400"
)
EVENT_TIME_DESCRIPTION: Final = (
    "When it happened, for date filters: RFC 3339 (2024-05-08T12:00:00Z; a time without an offset, naive, is"
    " taken as UTC), after 0001-01-01T00:00:00Z and before 9999-12-31T23:59:59.999999Z, kept to the"
    " microsecond (digits past it dropped, never rounded: 23:59:59.9999999 stays in its second) and read back in UTC"
)
METADATA_DESCRIPTION: Final = (
    "Any JSON object, returned as sent, at most 32 levels deep; it counts toward the document's size limit."
    " A whole number of any size is kept exactly; one with a fraction or an exponent is a 64-bit float and"
    " reads back a float (`1e16` as `1e16`, `-0.0` as `0.0`); one past a float's range (`1e400`) is a 400"
)
CONTEXT_DESCRIPTION: Final = (
    "Text that helps find the document without being its text (a chat's previous turn): embedded and indexed"
    " with every chunk, never a chunk's text. Stored in Unicode NFC"
)


class DocumentIn(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """One document to ingest. `markdown` is accepted as a synonym of `text`; an unknown field is a 400.

    `context` is text that helps find the document without being part of it (e.g. a conversation's
    previous turn): embedded and indexed with every chunk, returned by `GET` of the document, never as
    a chunk's text. A leading YAML front matter block (`---`, `key: value` lines with a known key such as
    `title`, `tags`, `date`, `---`) is not chunked: its `title`, `tags` and ISO 8601 `date` fill the fields
    the request leaves empty (`event_time` for `date`), and its fields join `metadata` (the request's keys
    win), as `poimen ingest` reads a file's. A `---` block of prose is text.
    """

    id: Annotated[DocumentId, msgspec.Meta(description=ID_DESCRIPTION)]
    text: Annotated[str | None, msgspec.Meta(description=TEXT_DESCRIPTION)] = None
    markdown: Annotated[str | None, msgspec.Meta(description="A synonym of `text`: give one, not both")] = None
    source: Annotated[str, msgspec.Meta(max_length=1024, description=SOURCE_DESCRIPTION)] = ""
    title: Annotated[
        str,
        msgspec.Meta(
            max_length=MAX_TITLE_CHARS,
            description="Stored in Unicode NFC. Absent or empty: front matter's `title`, else the first heading",
        ),
    ] = ""
    tags: Annotated[list[Tag], msgspec.Meta(max_length=MAX_DOCUMENT_TAGS, description=TAGS_DESCRIPTION)] = []
    event_time: Annotated[datetime | None, msgspec.Meta(description=EVENT_TIME_DESCRIPTION)] = None
    metadata: Annotated[dict[str, Any], msgspec.Meta(description=METADATA_DESCRIPTION)] = {}
    context: Annotated[str, msgspec.Meta(max_length=MAX_CONTEXT_CHARS, description=CONTEXT_DESCRIPTION)] = ""
    expected_version: Annotated[int, msgspec.Meta(ge=0)] | None = None
    """Write only if the stored version is this one (0: only if the document does not exist yet); else 409."""
    time_paths: ClassVar[TimePaths] = (("event_time",),)

    def body(self) -> str:
        """The document's text, whichever field carried it; both given is an `InvalidInputError`."""
        if self.text is not None and self.markdown is not None:
            # Which one was meant? Taking one silently dropped the other.
            msg = f"document {self.id!r}: give text or markdown, not both"
            raise InvalidInputError(msg, field="markdown", document_id=self.id)
        return self.text if self.text is not None else (self.markdown or "")

    def to_domain(self, project_id: str) -> Document:
        """The domain document; naive event times are taken as UTC. Front matter fills what is not given."""
        text = self.body()
        front = front_matter_fields(text)
        return Document(
            project_id=project_id,
            document_id=self.id,
            source=self.source or self.id,
            title=document_title(self.title, text=text, front_title=front.title),
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
    time_paths: ClassVar[TimePaths] = (("documents", "*", "event_time"),)
    """`app.api.openapi_document` states this server's bound (`MAX_BATCH_DOCUMENTS`) as the list's `maxItems`."""


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
