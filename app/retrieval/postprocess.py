"""What happens to a fused ranking before it is returned: per-document collapsing and a score floor. Pure."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

    from app.domain.models import FusedHit


def collapse_per_document(hits: Sequence[FusedHit], max_per_document: int) -> list[FusedHit]:
    """Keep at most `max_per_document` hits of each document, in order (so its best ones stay).

    Raises `ValueError` when `max_per_document` is below 1.
    """
    if max_per_document < 1:
        msg = f"max_per_document must be >= 1, got {max_per_document}"
        raise ValueError(msg)
    kept_per_document: dict[str, int] = {}
    kept: list[FusedHit] = []
    for hit in hits:
        document_id = hit.chunk.document_id
        if kept_per_document.get(document_id, 0) < max_per_document:
            kept_per_document[document_id] = kept_per_document.get(document_id, 0) + 1
            kept.append(hit)
    return kept


def filter_min_score(hits: Sequence[FusedHit], min_score: float) -> list[FusedHit]:
    """Keep hits whose `readable_score` (the calibrated relevance in [0, 1] once set) is at least `min_score`."""
    return [hit for hit in hits if hit.readable_score >= min_score]
