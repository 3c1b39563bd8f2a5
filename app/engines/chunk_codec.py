"""The one mapping between a `Chunk` and the record an engine stores for it, both ways.

A record holds the twelve fields that rebuild a chunk: `chunk_id`, `document_id`, `project_id`, the
text, `source`, `level`, `breadcrumb`, `section_title`, `position`, `tags`, `event_time` and
`chunk_hash`. The tantivy payload (JSON) is exactly this record; an OpenSearch document is this
record under the reference mapping's names (the text as `content`) plus fields only searches read;
a PostgreSQL chunk row has these columns too, with `event_time` as a `datetime`.

The stored formats are public: on-disk tantivy indexes and OpenSearch documents written by earlier
versions must read back identically, so a change here is a schema change.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from app.domain.models import Chunk
from app.domain.moments import as_utc

if TYPE_CHECKING:
    from collections.abc import Mapping

TEXT_KEY: Final = "text"
"""The record key of the chunk's text; OpenSearch stores it as `content` (the reference mapping)."""


def chunk_to_record(chunk: Chunk, *, text_key: str = TEXT_KEY) -> dict[str, Any]:
    """The JSON-ready record of a chunk: lists for tuples, `event_time` as ISO 8601 or None.

    The chunk's `context` is not part of it: the document store keeps it in a column of its own.
    """
    return {
        "chunk_id": chunk.chunk_id,
        "document_id": chunk.document_id,
        "project_id": chunk.project_id,
        text_key: chunk.text,
        "source": chunk.source,
        "level": chunk.level,
        "breadcrumb": list(chunk.breadcrumb),
        "section_title": chunk.section_title,
        "position": chunk.position,
        "tags": list(chunk.tags),
        "event_time": None if chunk.event_time is None else chunk.event_time.isoformat(),
        "chunk_hash": chunk.chunk_hash,
    }


def chunk_from_record(record: Mapping[str, Any], *, text_key: str = TEXT_KEY, context: str = "") -> Chunk:
    """Rebuild the chunk of a record; keys a record lacks take the chunk's defaults, other keys are ignored.

    `event_time` may be ISO 8601 text (JSON stores) or a `datetime` (PostgreSQL rows). `context` is
    the chunk's context where the caller has it (the document store), else empty.

    Raises:
        KeyError: the record lacks an identity field or the text.
    """
    event_time = record.get("event_time")
    return Chunk(
        chunk_id=record["chunk_id"],
        document_id=record["document_id"],
        project_id=record["project_id"],
        text=record[text_key],
        source=record["source"],
        level=record["level"],
        breadcrumb=tuple(record.get("breadcrumb") or ()),
        section_title=record.get("section_title") or "",
        position=int(record.get("position") or 0),
        tags=tuple(record.get("tags") or ()),
        event_time=_datetime_of(event_time),
        chunk_hash=record.get("chunk_hash") or "",
        context=context,
    )


def _datetime_of(value: str | datetime | None) -> datetime | None:
    # A row written before event times were bounded may hold -infinity, which the driver reads naive.
    if value is None or isinstance(value, datetime):
        return as_utc(value)
    return as_utc(datetime.fromisoformat(value))
