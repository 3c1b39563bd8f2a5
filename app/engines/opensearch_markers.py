"""Per-document version markers: the newest outbox version that started writing each document, as a document.

Chunk writes are versioned per chunk (`app.engines.opensearch_bodies`), which cannot refuse a stale
write of chunk ids the newer snapshot never had: nothing of that id is there to conflict with. So
each versioned write of a document first writes the document's marker, externally versioned on the
outbox version like its chunks (`VERSION_TYPE`). The marker is one `_id` per document, so OpenSearch
orders every writer of the document on it:

1. A writer whose marker is refused (409) is stale: it writes nothing for that document.
2. Otherwise it writes the chunks and deletes the older ones, then reads the marker again (a
   real-time `mget`). A newer marker means a newer writer started meanwhile and its delete may have
   run before these chunks were visible: the writer deletes its own chunks of the document, every
   chunk at its version or older.

Markers are the documents' tombstones too: deleting a document's chunks keeps its marker, so a late
stale write of a deleted document is refused. They hold no text field and no `project_id` or
`document_id` (their own `MARKER_PROJECT_FIELD` and `MARKER_DOCUMENT_FIELD` instead), so no search,
chunk listing or chunk delete can match one, and BM25's per-field statistics never count them.
They live in their project's index, so `delete_project` removes them with it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from app.engines.opensearch_bodies import VERSION_TYPE, bounded_key

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from app.domain.models import DocumentChunks

MARKER_ID_PREFIX: Final = "@version-marker"
"""`@` is outside `PROJECT_ID_PATTERN`, and a chunk's `_id` starts with its project id: no marker `_id` is a chunk's."""
MARKER_PROJECT_FIELD: Final = "marker_project_id"
MARKER_DOCUMENT_FIELD: Final = "marker_document_id"


def marker_key(project_id: str, document_id: str) -> str:
    """The `_id` of a document's version marker."""
    return bounded_key(f"{MARKER_ID_PREFIX}:{project_id}:{document_id}")


def versioned_documents(documents: Sequence[DocumentChunks]) -> dict[str, DocumentChunks]:
    """Marker `_id` -> document, for the documents written with an outbox version (the others have no marker)."""
    return {
        marker_key(document.project_id, document.document_id): document
        for document in documents
        if document.outbox_version is not None
    }


def build_marker_actions(
    documents: Sequence[DocumentChunks], *, index_of: Callable[[str], str]
) -> list[dict[str, Any]]:
    """`async_bulk` index actions writing the marker of every versioned document at its outbox version.

    Each marker goes to its project's index (`index_of(project_id)`).
    """
    return [
        {
            "_op_type": "index",
            "_index": index_of(document.project_id),
            "_id": key,
            "_source": {MARKER_PROJECT_FIELD: document.project_id, MARKER_DOCUMENT_FIELD: document.document_id},
            "version": document.outbox_version,
            "version_type": VERSION_TYPE,
        }
        for key, document in versioned_documents(documents).items()
    ]


def build_markers_get_body(documents: Sequence[DocumentChunks], *, index_of: Callable[[str], str]) -> dict[str, Any]:
    """The `mget` body reading the markers of the versioned documents (no `_source`: only `_version` counts)."""
    return {
        "docs": [
            {"_index": index_of(document.project_id), "_id": key, "_source": False}
            for key, document in versioned_documents(documents).items()
        ]
    }


def overtaken_documents(documents: Sequence[DocumentChunks], response: Mapping[str, Any]) -> frozenset[tuple[str, str]]:
    """(project_id, document_id) of the documents whose marker, in an `mget` response, is newer than their write.

    A marker not found (its project deleted meanwhile) overtakes nothing.
    """
    written = versioned_documents(documents)
    overtaken: set[tuple[str, str]] = set()
    for found in response.get("docs", []):
        document = written.get(str(found.get("_id")))
        if document is None or not found.get("found") or document.outbox_version is None:
            continue
        if int(found.get("_version", 0)) > document.outbox_version:
            overtaken.add((document.project_id, document.document_id))
    return frozenset(overtaken)
