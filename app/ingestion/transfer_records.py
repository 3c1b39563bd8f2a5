"""One document line of a project export: its record (document, chunks, embeddings) and what it must hold.

`app.ingestion.transfer` reads and writes whole exports; this module turns one document into its JSON
record and back, and checks a record read back before anything is written (`RecordCheck`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from app.domain.errors import InvalidInputError
from app.domain.models import Chunk, EmbeddedChunk, StoredDocument
from app.domain.moments import EARLIEST, LATEST, as_utc
from app.ingestion.content_hashes import chunk_hash, embedding_text
from app.ingestion.validation import (
    MAX_METADATA_DEPTH,
    is_unicode_text,
    metadata_strings,
    nesting_depth,
    size_problem,
)

if TYPE_CHECKING:
    from collections.abc import Iterable

MAX_DOCUMENT_ID_CHARS: Final = 256
"""As the API takes them (`app.api.document_schemas.DocumentId`)."""
MAX_VERSION: Final = 2**53
"""Above any version a store counts to, and what a JSON number holds exactly in every client."""
MAX_POSITION: Final = 2**31
"""Past the last position PostgreSQL's `integer` column holds (a chunker never counts near it)."""


def _time(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def document_record(document: StoredDocument, chunks: Iterable[EmbeddedChunk]) -> dict[str, Any]:
    """One document line: the document's fields and every chunk with its embedding and model."""
    return {
        "kind": "document",
        "id": document.document_id,
        "source": document.source,
        "title": document.title,
        "content_hash": document.content_hash,
        "tags": list(document.tags),
        "event_time": _time(document.event_time),
        "metadata": dict(document.metadata),
        "created_at": _time(document.created_at),
        "updated_at": _time(document.updated_at),
        "version": document.version,
        "chunks": [
            {
                "id": item.chunk.chunk_id,
                "text": item.chunk.text,
                "source": item.chunk.source,
                "level": item.chunk.level,
                "breadcrumb": list(item.chunk.breadcrumb),
                "section_title": item.chunk.section_title,
                "position": item.chunk.position,
                "tags": list(item.chunk.tags),
                "event_time": _time(item.chunk.event_time),
                "chunk_hash": item.chunk.chunk_hash,
                "context": item.chunk.context,
                "embedding_model": item.embedding_model,
                "embedding": [float(value) for value in item.embedding],
            }
            for item in chunks
        ],
    }


class RecordFieldError(TypeError):
    """A field of a document line holds another JSON type than the format's; the message names the field.

    Nothing is converted: `str()` of a null title wrote the title "None", `tuple()` of the tags "abc" the
    tags a, b and c, `dict()` of a list of pairs an object; a wrong line is a corrupted file.
    """


_JSON_KINDS: Final = ((bool, "a boolean"), (int | float, "a number"), (str, "a string"), (list, "a list"))
_ABSENT: Final = object()


def json_kind(value: object) -> str:
    """What JSON calls `value`'s type, with its article."""
    if value is None:
        return "null"
    return next((name for kind, name in _JSON_KINDS if isinstance(value, kind)), "an object")


def _is(value: object, kind: type | tuple[type, ...]) -> bool:
    return isinstance(value, kind) and not isinstance(value, bool)  # JSON's true is no number


def _wrong(path: str, value: object, expected: str) -> RecordFieldError:
    return RecordFieldError(f"the field {path!r} is {json_kind(value)}, not {expected}")


def _text(record: dict[str, Any], key: str, *, path: str = "", default: object = _ABSENT) -> str:
    value = record[key] if default is _ABSENT else record.get(key, default)
    if not isinstance(value, str):
        raise _wrong(path + key, value, "a string")
    return value


def _list(
    record: dict[str, Any], key: str, kind: type | tuple[type, ...], expected: str, *, path: str = ""
) -> list[Any]:
    value = record[key]
    if not isinstance(value, list):
        raise _wrong(path + key, value, expected)
    for item in value:
        if not _is(item, kind):
            msg = f"the field {path + key!r} is a list holding {json_kind(item)}, not {expected}"
            raise RecordFieldError(msg)
    return value


def _texts(record: dict[str, Any], key: str, *, path: str = "") -> tuple[str, ...]:
    return tuple(_list(record, key, str, "a list of strings", path=path))


def _moment(record: dict[str, Any], key: str, *, path: str = "") -> datetime | None:
    """An optional time: null or an ISO 8601 string (naive: UTC, as the API takes it), in UTC."""
    value = record.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise _wrong(path + key, value, "a string or null")
    return _utc_moment(value, path=path + key)


def _required_moment(record: dict[str, Any], key: str) -> datetime:
    value = record[key]
    if not isinstance(value, str):
        raise _wrong(key, value, "a string")
    return _utc_moment(value, path=key)


def _utc_moment(value: str, *, path: str) -> datetime:
    """The time `value` names, in UTC; `ValueError` for no ISO 8601 time or one PostgreSQL's driver cannot send.

    A naive time was sent in the machine's local time zone; one whose offset carries it past the range of
    `datetime` (0001-01-01T00:00:00+14:00) failed its write in the driver, after the batches before it.
    """
    moment = as_utc(datetime.fromisoformat(value))
    if not EARLIEST < moment < LATEST:
        msg = (
            f"the field {path!r} is {value}, not a time after 0001-01-01T00:00:00Z and before "
            "9999-12-31T23:59:59.999999Z"
        )
        raise ValueError(msg)
    return moment


def _position(item: dict[str, Any], *, path: str) -> int:
    value = item["position"]
    if not _is(value, int):
        raise _wrong(path + "position", value, "an integer")
    if not 0 <= value < MAX_POSITION:  # over it, PostgreSQL refused the write after the batches before it
        msg = f"the field {path + 'position'!r} is {value}, not a position from 0 to 2**31 - 1"
        raise ValueError(msg)
    return int(value)


def _version(record: dict[str, Any], *, path: str = "") -> int:
    """The document's version where it was exported (0 in a file from before versions were exported)."""
    value = record.get("version", 0)
    if not _is(value, int):
        raise _wrong(path + "version", value, "an integer")
    if not 0 <= value < MAX_VERSION:
        msg = f"the field 'version' is {value}, not a version from 0 to 2**53"
        raise ValueError(msg)
    return int(value)


def _metadata(record: dict[str, Any], *, path: str = "") -> dict[str, Any]:
    value = record.get("metadata")
    if value is None:  # absent or null: none, as read before
        return {}
    if not isinstance(value, dict):
        raise _wrong(path + "metadata", value, "an object")
    return value


def _embedding(item: dict[str, Any], *, path: str) -> list[float]:
    values = _list(item, "embedding", (int, float), "a list of numbers", path=path)
    try:
        return [float(value) for value in values]
    except OverflowError:  # an integer of 309 digits or more: JSON, but past a double, as 1e999 is
        msg = f"the field {path + 'embedding'!r} holds a number past the range of a double"
        raise ValueError(msg) from None


def _chunk(item: dict[str, Any], *, document_id: str, project_id: str, path: str) -> EmbeddedChunk:
    return EmbeddedChunk(
        Chunk(
            chunk_id=_text(item, "id", path=path),
            document_id=document_id,
            project_id=project_id,
            text=_text(item, "text", path=path),
            source=_text(item, "source", path=path),
            level=_text(item, "level", path=path),
            breadcrumb=_texts(item, "breadcrumb", path=path),
            section_title=_text(item, "section_title", path=path),
            position=_position(item, path=path),
            tags=_texts(item, "tags", path=path),
            event_time=_moment(item, "event_time", path=path),
            chunk_hash=_text(item, "chunk_hash", path=path),
            context=_text(item, "context", path=path, default=""),
        ),
        _embedding(item, path=path),
        _text(item, "embedding_model", path=path),
    )


def document_from_record(record: object, *, project_id: str) -> tuple[StoredDocument, list[EmbeddedChunk]]:
    """The document and embedded chunks of one document line, placed in `project_id`.

    Raises `KeyError` for a missing field, `RecordFieldError` for one of another JSON type, `ValueError`
    for a time that is no ISO 8601 one or past what PostgreSQL's driver sends, for a position or a
    version out of range, and for an embedding number past a double's range.
    """
    if not isinstance(record, dict):
        msg = f"the line is {json_kind(record)}, not an object"
        raise RecordFieldError(msg)
    document_id = _text(record, "id")
    items = _list(record, "chunks", dict, "a list of objects")
    chunks = [
        _chunk(item, document_id=document_id, project_id=project_id, path=f"chunks[{number}].")
        for number, item in enumerate(items)
    ]
    created_at = _required_moment(record, "created_at")
    updated_at = _required_moment(record, "updated_at")
    document = StoredDocument(
        project_id=project_id,
        document_id=document_id,
        source=_text(record, "source"),
        title=_text(record, "title"),
        content_hash=_text(record, "content_hash"),
        tags=_texts(record, "tags"),
        event_time=_moment(record, "event_time"),
        metadata=_metadata(record),
        chunks=tuple(item.chunk for item in chunks),
        lexically_indexed=False,
        created_at=created_at,
        updated_at=updated_at,
        version=_version(record),
    )
    return document, chunks


@dataclass(slots=True)
class RecordCheck:
    """What a document line must hold for its write not to fail in the store part-way through an import.

    The store refused a NaN or a short embedding, a NUL in a text, a tag that is no string, only once the
    earlier batches were written ("run it again" then failed at the same line, for ever); an id of 3,000
    characters, one twice, a document without chunks or a chunk of another model went in unchecked; so did
    a chunk id of another document (it replaced that document's chunk), a lone surrogate (valid as a JSON
    escape, but no UTF-8 can hold it) and a chunk whose text was edited after the export (its vector, and
    every later ingest reusing vectors by `chunk_hash`, stayed the old text's).
    """

    model_name: str
    dimensions: int
    seen: set[str] = field(default_factory=set)

    def __call__(self, document: StoredDocument, embedded: list[EmbeddedChunk], number: int) -> None:
        """Raise `InvalidInputError` naming line `number` when the document would fail its write."""
        problem = self._problem(document, embedded)
        if problem is not None:
            msg = f"line {number}: document {document.document_id[:80]!r}: {problem}"
            raise InvalidInputError(msg, field=f"line {number}")
        self.seen.add(document.document_id)

    def _problem(self, document: StoredDocument, embedded: list[EmbeddedChunk]) -> str | None:  # noqa: PLR0911
        if document.document_id in self.seen:
            return "appears twice in the file"
        if not 0 < len(document.document_id) <= MAX_DOCUMENT_ID_CHARS:
            return f"the id must be 1 to {MAX_DOCUMENT_ID_CHARS} characters"
        if not embedded:
            return "has no chunks"
        if (metadata := metadata_problem(document.metadata)) is not None:
            return metadata
        tags = [*document.tags, *(tag for item in embedded for tag in item.chunk.tags)]
        if not all(isinstance(tag, str) and tag.strip() for tag in tags):
            return "a tag is not a string of 1 or more characters"
        sizes = size_problem(document.title, document.tags)  # a chunk carries its document's tags
        if sizes is not None:
            return sizes[1].removeprefix(": ").strip()
        for item in embedded:
            if item.embedding_model != self.model_name:
                return (
                    f"chunk {item.chunk.chunk_id!r} was embedded with {item.embedding_model!r},"
                    f" not the header's {self.model_name!r}"
                )
            if len(item.embedding) != self.dimensions or not all(map(math.isfinite, item.embedding)):
                return f"chunk {item.chunk.chunk_id!r}: the embedding is not {self.dimensions} finite numbers"
        texts = [document.title, document.source, *(text for _, text in metadata_strings(document.metadata))]
        texts += [text for item in embedded for text in (item.chunk.text, item.chunk.context, *item.chunk.breadcrumb)]
        texts += [*document.tags, *(tag for item in embedded for tag in item.chunk.tags)]
        if any("\x00" in text for text in texts):
            return "a text holds a NUL character, which PostgreSQL cannot store"
        if not all(map(is_unicode_text, texts)):
            return "a text holds a lone surrogate (such as \\ud800), which is not Unicode text"
        return chunk_problem(document.document_id, embedded)


def metadata_problem(metadata: object) -> str | None:
    """What PostgreSQL's JSONB or the API would refuse in metadata: nesting past the API's bound, no finite number.

    A number past a double's range (1e999) reads as infinity, which the write then refused after the batches
    before it; metadata nested past `MAX_METADATA_DEPTH` is refused by the API, so no export holds it.
    """
    if nesting_depth(metadata) > MAX_METADATA_DEPTH:  # checked first: the walk below recurses
        return f"metadata nests deeper than {MAX_METADATA_DEPTH} levels"
    if not _all_finite(metadata):
        return "metadata holds a number past the range of a double (such as 1e999)"
    return None


def _all_finite(value: object) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_all_finite(item) for item in value.values())
    if isinstance(value, list):
        return all(_all_finite(item) for item in value)
    return True


def chunk_problem(document_id: str, embedded: list[EmbeddedChunk]) -> str | None:
    """Each chunk id is `<document id>#<position>` as ingest names it, and its hash is of its own text."""
    positions = [item.chunk.position for item in embedded]
    if len(set(positions)) != len(positions):
        return "two chunks have the same position"
    for item in embedded:
        chunk = item.chunk
        if chunk.chunk_id != f"{document_id}#{chunk.position}":
            return f"chunk {chunk.chunk_id[:80]!r} is not named '<document id>#{chunk.position}' (another document's?)"
        if chunk.chunk_hash != chunk_hash(embedding_text(chunk)):
            return f"chunk {chunk.chunk_id[:80]!r}: its chunk_hash is not of its text (was the file edited?)"
    return None
