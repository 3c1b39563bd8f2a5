"""The body of `POST .../documents`: one document or `{"documents": [...]}`, decoded strictly and checked whole.

Bounds that msgspec would check only after building every item (a batch's length, a document's tags, its
metadata's size) are checked on the raw body first. A key given twice in one object, anywhere, is a 400.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from app.api.bounded_lists import LIST_TOO_LONG, refuse_long_lists, refuse_over_bound_lists
from app.api.document_schemas import DocumentBatchIn, DocumentIn
from app.api.heavy_metadata import refuse_heavy_metadata
from app.api.json_keys import refuse_repeated_keys
from app.api.microsecond_times import decoded_times_truncated, may_hold_past_microseconds, retruncated
from app.api.strict_bodies import EMPTY_BODY, TOO_DEEP, invalid_input_of, malformed_json
from app.domain.errors import InvalidInputError
from app.ingestion.validation import refuse_oversized

if TYPE_CHECKING:
    from collections.abc import Sequence


def decode_documents(
    body: bytes, *, max_document_bytes: int, max_batch_documents: int
) -> tuple[list[DocumentIn], bool]:
    """The body's documents and whether it is a batch; a 400 (413 for one over `max_document_bytes`) if they cannot be.

    A document's own refusals, here and in the pipeline, name its field as `located` words it.
    """
    # A batch's items counted before any is decoded: 3,000,000 tiny documents took 8 s and 650 MB to build
    # before their number was refused (msgspec checks a list's length once it has decoded every item).
    if not body.strip():  # worded as every other body's ("malformed JSON: Input data was truncated" said nothing)
        raise InvalidInputError(EMPTY_BODY, field="body")
    batch = False
    try:
        batch = _is_batch(body, max_batch_documents=max_batch_documents)
        refuse_over_bound_lists(body, DocumentBatchIn if batch else DocumentIn)  # a document's tags, likewise
        refuse_heavy_metadata(body, batch=batch, max_document_bytes=max_document_bytes)
        documents = _decoded(body, batch=batch)
        refuse_repeated_keys(body)  # msgspec kept the last of a repeated key
        _truncate_event_times(body, documents, batch=batch)
    except msgspec.ValidationError as error:
        if str(error).startswith("Expected `object`, got") and "at `$" not in str(error):  # not an object at all
            msg = 'expected a JSON object: one document, or {"documents": [...]}'
            raise InvalidInputError(msg, field="body") from None
        raise invalid_input_of(error, body_type=DocumentBatchIn if batch else DocumentIn, body=body) from None
    except msgspec.DecodeError as error:
        raise malformed_json(error, body) from None
    except RecursionError:
        raise InvalidInputError(TOO_DEEP, field="body") from None
    try:
        check_documents(documents, max_document_bytes=max_document_bytes)
    except InvalidInputError as error:
        raise located(error, documents, batch=batch) from None
    return documents, batch


def _decoded(body: bytes, *, batch: bool) -> list[DocumentIn]:
    """The body's documents; an `event_time` that msgspec rounds past year 9999 is truncated first.

    `9999-12-31T23:59:59.9999999+01:00` truncated is 22:59:59.999999 UTC, but msgspec rounds it (before its
    offset) to year 10000 and refuses it as no date-time (`decoded_times_truncated`).
    """
    if batch:
        return decoded_times_truncated(body, DocumentBatchIn, DocumentBatchIn.time_paths).documents
    return [decoded_times_truncated(body, DocumentIn, DocumentIn.time_paths)]


class _EventTimeText(msgspec.Struct):
    event_time: str | None = None


class _EventTimeTexts(msgspec.Struct):
    documents: list[_EventTimeText] = []


def _truncate_event_times(body: bytes, documents: Sequence[DocumentIn], *, batch: bool) -> None:
    """Each `event_time` with digits past the microsecond as written with them dropped (`app.api.microsecond_times`).

    The texts are read again only when the body may hold such a time.
    """
    if not may_hold_past_microseconds(body):
        return
    texts = (
        msgspec.json.decode(body, type=_EventTimeTexts).documents
        if batch
        else [msgspec.json.decode(body, type=_EventTimeText)]
    )
    for document, text in zip(documents, texts, strict=True):
        document.event_time = retruncated(document.event_time, text.event_time)


def check_documents(documents: Sequence[DocumentIn], *, max_document_bytes: int) -> None:
    """Each document has text and is within the size limit; each id is given once (the second is named)."""
    seen: set[str] = set()
    for document in documents:
        if document.id in seen:
            msg = f"document {document.id!r} appears twice in one batch"
            raise _RepeatedIdError(msg, field="document_id", document_id=document.id)
        seen.add(document.id)
        if document.text is None and document.markdown is None:
            msg = f"document {document.id!r} has no text"
            raise InvalidInputError(msg, field="text", document_id=document.id)
        refuse_oversized(
            document.id,
            text_bytes=len(document.body().encode()),
            metadata_bytes=len(msgspec.json.encode(document.metadata)) if document.metadata else 0,
            max_document_bytes=max_document_bytes,
        )


class _RepeatedIdError(InvalidInputError):
    """A document id given a second time in one batch: the item it names is that second one."""


def located(error: InvalidInputError, documents: Sequence[DocumentIn], *, batch: bool) -> InvalidInputError:
    """`error` with its field as the body's path: `id` for the document id, `documents[2].tags` in a batch.

    The ingestion pipeline names a document's field as the domain does (`document_id`, `tags`) and the
    document by its id, whichever item of a batch it was; msgspec's own refusals name the path already
    (`documents[2].text`). An error of no document is returned as it is.
    """
    if error.document_id is None or error.field is None:
        return error
    field = "id" if error.field == "document_id" else error.field
    if batch:
        indexes = [index for index, document in enumerate(documents) if document.id == error.document_id]
        if not indexes:
            return error
        field = f"documents[{indexes[-1] if isinstance(error, _RepeatedIdError) else indexes[0]}].{field}"
    return type(error)(error.message, field=field, document_id=error.document_id)


def _is_batch(body: bytes, *, max_batch_documents: int) -> bool:
    """Whether `body` is a batch (`documents`), refused when longer than `max_batch_documents` before any is decoded."""
    try:
        present = refuse_long_lists(body, {"documents": max_batch_documents})
    except msgspec.ValidationError as error:
        if LIST_TOO_LONG in str(error):
            msg = f"more than {max_batch_documents} documents in one request; at most {max_batch_documents}"
            raise InvalidInputError(msg, field="documents") from None
        if "at `$.documents`" in str(error):
            msg = "documents must be an array of documents"
            raise InvalidInputError(msg, field="documents") from None
        raise  # not an object: the caller words it
    return "documents" in present
