"""How domain objects meet PostgreSQL rows: chunk rows to `Chunk`s, documents and chunks to bound parameters.

A chunk row has the columns of `app.engines.chunk_codec`'s record (plus the chunk's context when
selected), so it is decoded by that codec. Vectors travel as pgvector's text form, cast in SQL.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Final, cast

from app.domain.tags import tag_keys
from app.engines.chunk_codec import chunk_from_record, chunk_to_record

if TYPE_CHECKING:
    from collections.abc import Sequence

    from sqlalchemy.engine import Row

    from app.domain.document_versions import RestoreFloor
    from app.domain.models import Chunk, DocumentChunks, EmbeddedChunk, StoredDocument

ANY_VERSION: Final = 2**63 - 1
"""Completes an outbox entry whatever its version (a `DocumentChunks` without `outbox_version`)."""


def chunk_from_row(row: Row[Any]) -> Chunk:
    """The chunk of a row selected with `CHUNK_COLUMNS` (context empty) or `STORED_CHUNK_COLUMNS`."""
    # Row's documented mapping view; its keys are the selected column names.
    record = cast("Mapping[str, Any]", row._mapping)  # noqa: SLF001
    return chunk_from_record(record, context=record.get("context", ""))


def json_value(value: object) -> dict[str, object]:
    """A `jsonb` value as a dict (an empty one for anything but an object)."""
    # SQLAlchemy's asyncpg dialect registers a jsonb codec that already decodes; plain asyncpg gives text.
    decoded = json.loads(value) if isinstance(value, str | bytes) else value
    return dict(decoded) if isinstance(decoded, dict) else {}


def metadata_json(metadata: Mapping[str, object]) -> str:
    """A document's metadata as the JSON text its `jsonb` column is given, so that every float reads back a float.

    jsonb keeps a number's digits, not its spelling: `1e16` (Python's and msgspec's form of a whole float
    from 1e16 up) read back as `10000000000000000`, an integer to every JSON decoder, and `-2.5e22` as
    an integer that is not even the float's value. Such a float is written out in full with `.0`
    (`10000000000000000.0`), whose scale jsonb keeps; everything else is written as `json.dumps` writes it.
    """
    text = json.dumps(metadata, default=str)
    # json writes such a float `1e+16`: without an `e+` anywhere (in a string or not), there is none.
    return _json_text(metadata) if "e+" in text else text


def _json_text(value: object) -> str:
    if isinstance(value, float):
        text = json.dumps(value)  # NaN and Infinity stay as json writes them: jsonb refuses them
        return f"{Decimal(text):f}.0" if "e" in text and value.is_integer() else text
    if isinstance(value, Mapping):
        items = (f"{json.dumps(_key_text(key))}:{_json_text(item)}" for key, item in value.items())
        return "{" + ",".join(items) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(_json_text(item) for item in value) + "]"
    return json.dumps(value, default=str)


def _key_text(key: object) -> str:
    """An object key as `json.dumps` spells a key that is not a string (`1`, `true`, `null`)."""
    return key if isinstance(key, str) else json.dumps(key, default=str)


_NINE_DIGITS = "{:.9g}".format


def vector_literal(embedding: Sequence[float]) -> str:
    """The text form pgvector parses, `[0.1,0.2]`; sent as text and cast in SQL, so no codec registration is needed.

    Nine significant digits: every float32 (what pgvector stores) survives the round trip exactly, in
    about half the time and 40 % fewer characters than Python's shortest float64 repr (on every query).
    """
    return "[" + ",".join(map(_NINE_DIGITS, embedding)) + "]"


def document_parameters(document: StoredDocument, *, restoring: RestoreFloor | None = None) -> Mapping[str, object]:
    """The bound parameters of `UPSERT_DOCUMENT` for one document (an import's `RestoreFloor` for its project)."""
    floor = restoring if restoring is not None and restoring.project_id == document.project_id else None
    return {
        "restore_left": None if floor is None else floor.left,
        "restore_before": None if floor is None else floor.before,
        "project_id": document.project_id,
        "document_id": document.document_id,
        "source": document.source,
        "title": document.title,
        "content_hash": document.content_hash,
        "tags": list(document.tags),
        "tag_keys": list(tag_keys(document.tags)),
        "event_time": document.event_time,
        "metadata": metadata_json(document.metadata),
        "created_at": document.created_at,
        "updated_at": document.updated_at,
        "version": document.version,  # a floor: 0 from ingest, the exported version from an import
    }


def chunk_parameters(document: StoredDocument, embedded: EmbeddedChunk) -> Mapping[str, object]:
    """The bound parameters of `UPSERT_CHUNK` for one chunk of `document`."""
    chunk = embedded.chunk
    return {
        **chunk_to_record(chunk),
        # The document decides where its chunks live, whatever a chunk says.
        "project_id": document.project_id,
        "document_id": document.document_id,
        "tag_keys": list(tag_keys(chunk.tags)),
        "event_time": chunk.event_time,  # a timestamptz parameter, not the record's ISO text
        "context": chunk.context,
        "embedding": vector_literal(embedded.embedding),
        "embedding_model": embedded.embedding_model,
    }


def outbox_parameters(documents: Sequence[DocumentChunks]) -> Mapping[str, object]:
    """The bound parameters of `COMPLETE_OUTBOX`: each document's claimed version, or any version."""
    return {
        "projects": [document.project_id for document in documents],
        "documents": [document.document_id for document in documents],
        "versions": [
            ANY_VERSION if document.outbox_version is None else document.outbox_version for document in documents
        ],
    }


def key_parameters(keys: Sequence[tuple[str, str]]) -> Mapping[str, object]:
    """`:projects` and `:documents`, parallel arrays of (project id, document id) keys."""
    return {"projects": [key[0] for key in keys], "documents": [key[1] for key in keys]}
