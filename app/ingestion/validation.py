"""Validation of an ingest batch: what the store cannot hold, refused with the field named. Pure."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

from app.domain.errors import DocumentTooLargeError, InvalidInputError
from app.domain.moments import EARLIEST, LATEST
from app.domain.project_ids import PROJECT_ID_RULE, is_project_id
from app.domain.tags import MAX_DOCUMENT_TAGS, MAX_TAG_CHARS, MAX_TITLE_CHARS

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Sequence

    from app.domain.models import Document

MAX_METADATA_DEPTH: Final = 32
"""Objects and arrays within one another in a document's metadata; deeper is refused before anything walks it."""


def validate_documents(documents: Sequence[Document], *, max_document_bytes: int | None = None) -> None:
    """Raise `InvalidInputError` naming the field when a batch cannot be ingested as sent.

    Rejects: a project id the API could not address (`PROJECT_ID_PATTERN`; a CLI ingest reaches here
    unchecked), an empty document id or one its URL cannot address (`is_addressable`), text that is empty
    after stripping, a blank tag, more tags, a longer tag or title than the API takes (front matter reaches
    here unchecked), metadata nested deeper than `MAX_METADATA_DEPTH`, a NUL character or a lone surrogate
    in any text field (PostgreSQL text cannot hold the one, UTF-8 the other; a BEIR corpus or an export can
    spell either as a JSON escape), an event time at or past the ends of `datetime`'s range, one document
    id twice in a batch and, given `max_document_bytes`, a document larger than it (`refuse_oversized`; the
    API checks the size as it decodes, the CLI reaches here unchecked).
    """
    seen: set[tuple[str, str]] = set()
    for document in documents:
        key = (document.project_id, document.document_id)
        if not is_project_id(document.project_id):
            msg = f"project id {document.project_id!r} is not {PROJECT_ID_RULE}"
            raise InvalidInputError(msg, field="project_id")
        if not document.document_id.strip():
            msg = "document id must not be empty"
            raise InvalidInputError(msg, field="document_id", document_id=document.document_id)
        if not is_addressable(document.document_id):
            msg = (
                f"document id {document.document_id!r} cannot be read back by its URL: a part between '/' is "
                "empty (a leading, trailing or doubled '/'), '.' or '..', which URLs drop or resolve"
            )
            raise InvalidInputError(msg, field="document_id", document_id=document.document_id)
        if key in seen:
            msg = f"document {document.document_id!r} appears twice in one batch"
            raise InvalidInputError(msg, field="document_id", document_id=document.document_id)
        seen.add(key)
        if nesting_depth(document.metadata) > MAX_METADATA_DEPTH:
            msg = f"document {document.document_id!r}: metadata nests deeper than {MAX_METADATA_DEPTH} levels"
            raise InvalidInputError(msg, field="metadata", document_id=document.document_id)
        _check_texts(document)
        if not document.text.strip():
            msg = f"document {document.document_id!r} has no text"
            raise InvalidInputError(msg, field="text", document_id=document.document_id)
        if any(not tag.strip() for tag in document.tags):
            msg = f"document {document.document_id!r}: a tag is blank (only white space)"
            raise InvalidInputError(msg, field="tags", document_id=document.document_id)
        _check_sizes(document)
        if max_document_bytes is not None:
            metadata_bytes = len(_compact_json(document.metadata)) if document.metadata else 0
            refuse_oversized(
                document.document_id,
                text_bytes=len(document.text.encode()),
                metadata_bytes=metadata_bytes,
                max_document_bytes=max_document_bytes,
            )
        # PostgreSQL's driver stores the ends of the range as -infinity and infinity and reads them back
        # without a time zone; `as_utc` clamps a moment whose offset carries it past them onto them.
        if document.event_time is not None and not EARLIEST < document.event_time < LATEST:
            msg = (
                f"document {document.document_id!r}: event_time must lie after 0001-01-01T00:00:00Z and before "
                "9999-12-31T23:59:59.999999Z"
            )
            raise InvalidInputError(msg, field="event_time", document_id=document.document_id)


def _check_texts(document: Document) -> None:
    """No NUL (PostgreSQL text cannot hold it) nor lone surrogate (UTF-8 cannot) in any text field."""
    for name, value in _text_fields(document):
        if "\x00" in value:
            msg = f"document {document.document_id!r}: {name} contains a NUL character"
            raise InvalidInputError(msg, field=name, document_id=document.document_id)
        if not is_unicode_text(value):
            msg = f"document {document.document_id!r}: {name} holds a lone surrogate (such as \\ud800)"
            raise InvalidInputError(msg, field=name, document_id=document.document_id)


def refuse_oversized(document_id: str, *, text_bytes: int, metadata_bytes: int, max_document_bytes: int) -> None:
    """Raise `DocumentTooLargeError` (413) when a document's text and metadata together pass the limit.

    Metadata is stored and returned with every read of the document, so it counts (20 MB of it passed).
    """
    size = text_bytes + metadata_bytes
    if size > max_document_bytes:
        msg = f"document {document_id!r} is {size} bytes (text and metadata); the limit is {max_document_bytes}"
        raise DocumentTooLargeError(
            msg, field="text" if text_bytes > max_document_bytes else "metadata", document_id=document_id
        )


def is_unicode_text(text: str) -> bool:
    r"""Whether `text` can be written as UTF-8: no lone surrogate, which a JSON `\ud800` escape decodes to."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _compact_json(value: object) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str).encode()


def _check_sizes(document: Document) -> None:
    """The title and tags within the bounds the API's fields have: front matter reaches here unchecked."""
    problem = size_problem(document.title, document.tags)
    if problem is not None:
        field, detail = problem
        msg = f"document {document.document_id!r}{detail}"
        raise InvalidInputError(msg, field=field, document_id=document.document_id)


def size_problem(title: str, tags: Sequence[str]) -> tuple[str, str] | None:
    """(field, what is wrong, to follow "document 'x'") when a title or the tags are past the API's bounds."""
    if len(title) > MAX_TITLE_CHARS:
        return "title", f": the title is {len(title)} characters; at most {MAX_TITLE_CHARS}"
    if len(tags) > MAX_DOCUMENT_TAGS:
        return "tags", f" has {len(tags)} tags; at most {MAX_DOCUMENT_TAGS}"
    longest = max(tags, key=len, default="")
    if len(longest) > MAX_TAG_CHARS:
        return "tags", f": a tag is {len(longest)} characters; at most {MAX_TAG_CHARS}"
    return None


def is_addressable(document_id: str) -> bool:
    """Whether `GET .../documents/{document_id}` reaches this id: no empty, `.` or `..` part between `/`.

    The service collapses `a//b` to `a/b` and drops a trailing `/`; clients (curl, browsers, httpx)
    resolve `.` and `..` before sending. Such a document could be written but never read or deleted by id.
    """
    return all(part not in {"", ".", ".."} for part in document_id.split("/"))


def _text_fields(document: Document) -> Iterator[tuple[str, str]]:
    yield "project_id", document.project_id
    yield "document_id", document.document_id
    yield "source", document.source
    yield "title", document.title
    yield "text", document.text
    yield "context", document.context
    for tag in document.tags:
        yield "tags", tag
    yield from metadata_strings(document.metadata)


def nesting_depth(value: object) -> int:
    """How many objects and arrays lie within one another in `value` (a scalar is 0), without recursing."""
    deepest = 0
    pending: list[tuple[object, int]] = [(value, 0)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, Mapping):
            children: Iterable[object] = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        deepest = max(deepest, depth + 1)
        if deepest > MAX_METADATA_DEPTH:
            return deepest
        pending.extend((child, depth + 1) for child in children)
    return deepest


def metadata_strings(value: object) -> Iterator[tuple[str, str]]:
    """Every string inside metadata, keys included, so a NUL cannot reach a JSONB column."""
    if isinstance(value, str):
        yield "metadata", value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from metadata_strings(key)
            yield from metadata_strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from metadata_strings(item)
