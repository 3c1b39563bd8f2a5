"""Golden tests: the version-marker bodies and the reading of a marker `mget`. No server."""

from __future__ import annotations

import re

from app.domain.models import DocumentChunks
from app.domain.project_ids import PROJECT_ID_PATTERN
from app.engines.opensearch_bodies import SEARCH_FIELDS, SOURCE_FIELDS, document_key
from app.engines.opensearch_mapping import index_body
from app.engines.opensearch_markers import (
    MARKER_DOCUMENT_FIELD,
    MARKER_PROJECT_FIELD,
    build_marker_actions,
    build_markers_get_body,
    marker_key,
    overtaken_documents,
)


def deleted(document_id: str, version: int | None, project_id: str = "poimen") -> DocumentChunks:
    return DocumentChunks(project_id, document_id, (), outbox_version=version)


def test_a_marker_key_names_project_and_document_behind_a_prefix_no_project_id_has() -> None:
    key = marker_key("poimen", "notes/a.md")

    assert key == "@version-marker:poimen:notes/a.md"
    assert re.fullmatch(PROJECT_ID_PATTERN, key.split(":", 1)[0]) is None
    assert key != document_key("poimen", "notes/a.md#0")


def test_markers_are_written_to_their_project_index_at_the_outbox_version_only_for_versioned_documents() -> None:
    documents = [deleted("doc-1", 7), deleted("doc-2", None), deleted("doc-3", 9, project_id="other")]

    actions = build_marker_actions(documents, index_of=lambda project_id: f"chunks-p-{project_id}")

    assert actions == [
        {
            "_op_type": "index",
            "_index": "chunks-p-poimen",
            "_id": "@version-marker:poimen:doc-1",
            "_source": {"marker_project_id": "poimen", "marker_document_id": "doc-1"},
            "version": 7,
            "version_type": "external_gte",
        },
        {
            "_op_type": "index",
            "_index": "chunks-p-other",
            "_id": "@version-marker:other:doc-3",
            "_source": {"marker_project_id": "other", "marker_document_id": "doc-3"},
            "version": 9,
            "version_type": "external_gte",
        },
    ]


def test_a_marker_holds_no_field_a_search_or_chunk_query_reads() -> None:
    properties = index_body()["mappings"]["properties"]
    searched = {field.split("^")[0].split(".")[0] for field in SEARCH_FIELDS}

    marker_fields = {MARKER_PROJECT_FIELD, MARKER_DOCUMENT_FIELD}

    assert {properties[field]["type"] for field in marker_fields} == {"keyword"}
    assert marker_fields.isdisjoint(searched | set(SOURCE_FIELDS))


def test_markers_are_read_by_id_without_source() -> None:
    body = build_markers_get_body(
        [deleted("doc-1", 7), deleted("doc-2", None), deleted("doc-3", 8, project_id="other")],
        index_of=lambda project_id: f"chunks-p-{project_id}",
    )

    assert body == {
        "docs": [
            {"_index": "chunks-p-poimen", "_id": "@version-marker:poimen:doc-1", "_source": False},
            {"_index": "chunks-p-other", "_id": "@version-marker:other:doc-3", "_source": False},
        ]
    }


def test_a_document_is_overtaken_only_by_a_newer_marker() -> None:
    documents = [deleted("newer", 5), deleted("equal", 5), deleted("gone", 5), deleted("plain", None)]
    response = {
        "docs": [
            {"_id": "@version-marker:poimen:newer", "found": True, "_version": 6},
            {"_id": "@version-marker:poimen:equal", "found": True, "_version": 5},
            {"_id": "@version-marker:poimen:gone", "found": False},
            {"_id": "@version-marker:poimen:unknown", "found": True, "_version": 9},
        ]
    }

    overtaken = overtaken_documents(documents, response)

    assert overtaken == frozenset({("poimen", "newer")})
