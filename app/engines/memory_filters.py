"""What the in-memory adapters match: `Filters` on chunks, `DocumentSelection` on documents, and cosine.

The reference semantics the SQL of the PostgreSQL adapters must agree with (the contract suites check it).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from app.domain.chunk_filters import has_source_prefix, in_time_window
from app.domain.models import titled_text
from app.domain.tags import tag_key, tag_keys
from app.engines.memory_analysis import analyze, holds_phrase

if TYPE_CHECKING:
    from collections.abc import Sequence

    from app.domain.catalog import DocumentSelection
    from app.domain.models import Chunk, Filters, StoredDocument


def chunk_matches(chunk: Chunk, filters: Filters) -> bool:
    """Whether `chunk` passes every filter, with the semantics of `Filters` (the SQL adapters' reference)."""
    return (
        chunk.project_id == filters.project_id
        and (not filters.levels or chunk.level in filters.levels)
        and set(tag_keys(filters.tags)) <= set(tag_keys(chunk.tags))
        and has_source_prefix(chunk.source, filters)
        and in_time_window(chunk.event_time, filters)
        and (filters.chunk_ids is None or chunk.chunk_id in filters.chunk_ids)
        and not holds_excluded_term(chunk, filters.excluded_terms)
    )


def holds_excluded_term(chunk: Chunk, excluded_terms: Sequence[str]) -> bool:
    """Whether the chunk's titled text, source or a tag holds one of `excluded_terms` (several words: a phrase)."""
    excluded = [analyzed for analyzed in (analyze(term) for term in excluded_terms) if analyzed]
    if not excluded:
        return False
    values = [analyze(titled_text(chunk.breadcrumb, chunk.text)), analyze(chunk.source), *map(analyze, chunk.tags)]
    return any(holds_phrase(value, phrase) for phrase in excluded for value in values)


def document_selected(document: StoredDocument, selection: DocumentSelection) -> bool:
    """Whether `document` is in `selection`, with the semantics of `DocumentSelection` (the SQL's reference)."""
    in_range = (selection.event_time_from is None and selection.event_time_to is None) or (
        document.event_time is not None
        and (selection.event_time_from is None or document.event_time >= selection.event_time_from)
        and (selection.event_time_to is None or document.event_time < selection.event_time_to)
    )
    return (
        document.project_id == selection.project_id
        and (not selection.source_prefix or document.source.startswith(selection.source_prefix))
        and (selection.tag is None or tag_key(selection.tag) in tag_keys(document.tags))
        and in_range
        and (selection.updated_since is None or document.updated_at >= selection.updated_since)
    )


def cosine_similarity(left: Sequence[float], right: Sequence[float]) -> float:
    """Cosine of the angle between two vectors, in [-1, 1]; 0.0 when either is all zeros."""
    norms = math.sqrt(math.fsum(x * x for x in left)) * math.sqrt(math.fsum(y * y for y in right))
    if norms == 0.0:
        return 0.0
    return math.fsum(x * y for x, y in zip(left, right, strict=True)) / norms
