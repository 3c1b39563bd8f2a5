"""Ingest bodies whose metadata is too large or holds too many values are refused before they are decoded.

Decoded first, 60 MB of `[[],[],...]` cost 1.4 GB and 6 s before the size was refused: these checks read the
raw body (`app/api/document_bodies.py` runs them before the typed decode).
"""

from __future__ import annotations

import re
from typing import Final

import msgspec

from app.domain.errors import DocumentTooLargeError, InvalidInputError

MAX_METADATA_VALUES: Final = 200_000
"""Values (keys, items, objects and arrays) the metadata of one ingest request holds in all."""
_JSON_STRING: Final = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')  # unrolled: no backtracking per character
_SMALL_METADATA_BYTES: Final = 65_536
"""Metadata this short holds too few values to count: 3 bytes a value at the least (`[],`)."""


class _MetadataOf(msgspec.Struct):
    id: str = ""
    metadata: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET


class _MetadataOfBatch(msgspec.Struct):
    documents: list[_MetadataOf] | msgspec.UnsetType = msgspec.UNSET


def refuse_heavy_metadata(body: bytes, *, batch: bool, max_document_bytes: int) -> None:
    """Refuse an ingest body whose metadata is too large or holds too many values, before it is decoded.

    Metadata counts toward `max_document_bytes` (413, as after decoding); a request's metadata holds at most
    `MAX_METADATA_VALUES` values in all (400). Decoded first, 60 MB of `[[],[],...]` cost 1.4 GB and 6 s
    before the size was refused. Other shape errors are left to the typed decode.
    """
    try:
        probe = msgspec.json.decode(body, type=_MetadataOfBatch if batch else _MetadataOf)
    except msgspec.ValidationError:
        return
    documents = probe.documents if isinstance(probe, _MetadataOfBatch) else [probe]
    found = [
        (f"documents[{index}].metadata" if batch else "metadata", d.id, bytes(d.metadata))
        for index, d in enumerate(documents or ())
        if d.metadata is not msgspec.UNSET
    ]
    for field, document_id, raw in found:
        if len(raw) > max_document_bytes:
            msg = (
                f"document {document_id!r}: its metadata alone is {len(raw)} bytes; the limit is "
                f"{max_document_bytes} (text and metadata)"
            )
            raise DocumentTooLargeError(msg, field=field)
    raws = [raw for _, _, raw in found]
    if sum(len(raw) for raw in raws) <= _SMALL_METADATA_BYTES:
        return
    # Commas and brackets inside strings count too at first: only a count over the bound is made exact.
    if sum(_structure(raw) for raw in raws) + len(raws) <= MAX_METADATA_VALUES:
        return
    values = sum(_json_values(raw) for raw in raws)
    if values > MAX_METADATA_VALUES:
        msg = f"the metadata of this request holds about {values} values (keys, items); at most {MAX_METADATA_VALUES}"
        raise InvalidInputError(msg, field="metadata")


def _json_values(raw: bytes) -> int:
    """An upper bound of the values in one JSON value: its commas, brackets and braces outside strings, plus one."""
    inside = sum(_structure(string.group()) for string in _JSON_STRING.finditer(raw))
    return _structure(raw) - inside + 1


def _structure(raw: bytes) -> int:
    return raw.count(b",") + raw.count(b"[") + raw.count(b"{")
