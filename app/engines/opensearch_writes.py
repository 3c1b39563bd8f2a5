"""The versioned writes of one `replace_documents` batch on OpenSearch: markers, chunks, stale deletes.

Functions over the `AsyncOpenSearch` client that `OpenSearchLexicalIndex.replace_documents`
(`app.engines.opensearch`) runs in this order: `claim_markers`, `index_chunks`, `delete_stale_chunks`, then
`overtaken_documents_of` to take back what a writer overtaken meanwhile wrote. Their bodies come from
`app.engines.opensearch_bodies` (chunk versions) and `app.engines.opensearch_markers` (document markers,
and why a stale writer needs both).

Shared by every function here:
- `index_of(project_id)` is the project's alias. Writes never create an index (`require_alias`).
- `options` are the adapter's per-request options, passed to every request as is.
- A document is named by its `(project_id, document_id)` across the batch's projects.
- Driver errors are not translated here: the caller runs these inside its `translate_errors()`.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from opensearchpy.helpers import async_bulk

from app.engines.opensearch_bodies import build_bulk_actions, build_stale_chunks_query, document_key
from app.engines.opensearch_markers import (
    build_marker_actions,
    build_markers_get_body,
    overtaken_documents,
    versioned_documents,
)
from app.engines.opensearch_responses import (
    raise_for_bulk_failures,
    raise_for_by_query_failures,
    split_version_conflicts,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from opensearchpy import AsyncOpenSearch

    from app.domain.models import DocumentChunks

DELETE_CLAUSES_PER_REQUEST: Final = 200
"""Documents per `delete_by_query`; stays well under OpenSearch's default 1024 boolean clauses."""

# The adapter's logger, not this module's: these records kept the name they had before the writes moved here.
logger = logging.getLogger("app.engines.opensearch")


async def claim_markers(
    client: AsyncOpenSearch,
    documents: Sequence[DocumentChunks],
    *,
    index_of: Callable[[str], str],
    bulk_chunk_size: int,
    options: Mapping[str, Any],
) -> frozenset[tuple[str, str]]:
    """Write each versioned document's marker; return the (project_id, document_id)s a newer marker refused."""
    actions = build_marker_actions(documents, index_of=index_of)
    if not actions:
        return frozenset()
    # No refresh: the marker is only read by id (real-time), and delete_project refreshes first.
    _, failed = await async_bulk(
        client, actions, chunk_size=bulk_chunk_size, raise_on_error=False, require_alias=True, **options
    )
    conflicted, failures = split_version_conflicts(failed if isinstance(failed, list) else [])
    raise_for_bulk_failures(failures, attempted=len(actions))
    written = versioned_documents(documents)
    stale = frozenset((written[key].project_id, written[key].document_id) for key in conflicted if key in written)
    if stale:
        logger.debug("opensearch refused stale writers", extra={"stale_documents": len(stale)})
    return stale


async def index_chunks(
    client: AsyncOpenSearch,
    documents: Sequence[DocumentChunks],
    *,
    index_of: Callable[[str], str],
    bulk_chunk_size: int,
    options: Mapping[str, Any],
) -> frozenset[tuple[str, str]]:
    """Bulk-index the chunks; return the (project_id, document_id)s a newer version refused."""
    actions = build_bulk_actions(documents, index_of=index_of, indexed_at=datetime.now().astimezone())
    if not actions:
        return frozenset()
    # One request for every project of the batch. `require_alias`: a write to a lost index fails
    # instead of creating one with a dynamic mapping.
    _, failed = await async_bulk(
        client,
        actions,
        chunk_size=bulk_chunk_size,
        raise_on_error=False,
        refresh=True,
        require_alias=True,
        **options,
    )
    conflicted, failures = split_version_conflicts(failed if isinstance(failed, list) else [])
    raise_for_bulk_failures(failures, attempted=len(actions))
    if not conflicted:
        return frozenset()
    owners = {
        document_key(chunk.project_id, chunk.chunk_id): (document.project_id, document.document_id)
        for document in documents
        for chunk in document.chunks
    }
    superseded = frozenset(owners[key] for key in conflicted if key in owners)
    logger.debug(
        "opensearch kept newer chunk versions",
        extra={"refused_chunks": len(conflicted), "superseded_documents": len(superseded)},
    )
    return superseded


async def delete_stale_chunks(
    client: AsyncOpenSearch,
    documents: Sequence[DocumentChunks],
    *,
    index_of: Callable[[str], str],
    superseded: frozenset[tuple[str, str]],
    options: Mapping[str, Any],
) -> None:
    """Delete the chunks each document no longer lists (all of a superseded document's, up to its version)."""
    for start in range(0, len(documents), DELETE_CLAUSES_PER_REQUEST):
        batch = documents[start : start + DELETE_CLAUSES_PER_REQUEST]
        # One request over the batch's projects: each clause names its own project anyway.
        aliases = sorted({index_of(document.project_id) for document in batch})
        response = await client.delete_by_query(
            index=",".join(aliases),
            body=build_stale_chunks_query(batch, superseded=superseded),
            conflicts="proceed",  # a chunk rewritten since the query's snapshot is newer: skip it
            refresh=True,
            **options,
        )
        raise_for_by_query_failures(response)


async def overtaken_documents_of(
    client: AsyncOpenSearch,
    documents: Sequence[DocumentChunks],
    *,
    index_of: Callable[[str], str],
    superseded: frozenset[tuple[str, str]],
    options: Mapping[str, Any],
) -> tuple[list[DocumentChunks], frozenset[tuple[str, str]]]:
    """The documents whose marker a newer writer took meanwhile, and their (project_id, document_id)s.

    Reads the markers of the versioned documents not already `superseded` (those had their chunks deleted
    already) again, in real time. The newer writer's delete may have run before this batch's chunks were
    visible, so each one returned needs every chunk at or below its version deleted.
    """
    pending = [
        document
        for document in documents
        if document.outbox_version is not None and (document.project_id, document.document_id) not in superseded
    ]
    if not pending:
        return [], frozenset()
    response = await client.mget(body=build_markers_get_body(pending, index_of=index_of), realtime=True, **options)
    overtaken = overtaken_documents(pending, response)
    if not overtaken:
        return [], frozenset()
    logger.debug("opensearch writers overtaken", extra={"overtaken_documents": len(overtaken)})
    return [document for document in pending if (document.project_id, document.document_id) in overtaken], overtaken
