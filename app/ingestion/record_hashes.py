"""The `record_hash` of an export's document line: what ties its `content_hash` to the rest of the line.

A document's `content_hash` is over the text it was ingested from, which the export does not carry (only its
chunks), so an import cannot recompute it. An import trusted it: a line edited after the export (a chunk's
text with its `chunk_hash` recomputed, a title) went in under the old hash, and a later ingest of the real
document compared equal, said "unchanged" and left the edited text stored, with the old text's vectors.
Each line now carries the SHA-256 of everything else in it, and an import refuses a line whose hash
disagrees (`RECORD_HASH_ALGORITHM` in the header says the file's lines carry one).

It guards against edits and damage, not against forgery: anyone can recompute it, as `chunk_hash`.
"""

from __future__ import annotations

import hashlib
import json
import struct
from typing import Any, Final

RECORD_HASH_ALGORITHM: Final = "sha256"
"""The header's `record_hashes`: every document line carries a `record_hash` made so."""


def record_hash(record: dict[str, Any]) -> str:
    """SHA-256 hex over `record` less its `record_hash`: its fields as canonical JSON, then every embedding.

    Canonical JSON (sorted keys, no spaces, ASCII escapes) so a line re-indented or with its keys reordered
    (`jq`) keeps its hash; the embeddings go in as little-endian doubles, in chunk order, which is the same
    value for every spelling of a number and about four times cheaper than writing them as JSON again.
    Expects a record `document_record` wrote, or one `document_from_record` has read without error.
    """
    chunks = record["chunks"]
    fields = {key: value for key, value in record.items() if key != "record_hash"}
    fields["chunks"] = [{key: value for key, value in chunk.items() if key != "embedding"} for chunk in chunks]
    digest = hashlib.sha256(json.dumps(fields, sort_keys=True, separators=(",", ":")).encode("ascii"))
    for chunk in chunks:
        embedding = chunk["embedding"]
        digest.update(struct.pack(f"<{len(embedding)}d", *embedding))
    return digest.hexdigest()


def record_hash_problem(record: dict[str, Any]) -> str | None:
    """Why `record`'s `record_hash` does not vouch for it (missing, not a string, not of its content), or None."""
    stated = record.get("record_hash")
    if stated is None:
        return "the field 'record_hash' is missing (the header says every line carries one)"
    if not isinstance(stated, str):
        return "the field 'record_hash' is not a string"
    if stated != record_hash(record):
        return (
            "the line was changed after the export: its record_hash is not of its content, so its content_hash may"
            " not be either (a later ingest of the real document would then be taken as unchanged); restore the"
            " exported line, or ingest the document from its source"
        )
    return None
