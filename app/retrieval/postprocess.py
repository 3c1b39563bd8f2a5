"""What happens to a fused ranking before it is returned: per-document collapsing, a score floor, the cut. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable

    from app.domain.models import FusedHit


@dataclass(frozen=True, slots=True)
class ReturnedPage:
    """What `returned_page` kept, and why reading stopped short of its `limit` (if it did).

    `collapsed`: hits passed over because their document already had `max_per_document` kept;
    `floored`: reading ended at a hit below `min_score`.
    """

    hits: list[FusedHit]
    collapsed: int = 0
    floored: bool = False


def returned_page(
    hits: Iterable[FusedHit], *, limit: int, max_per_document: int | None = None, min_score: float | None = None
) -> ReturnedPage:
    """The first `limit` of `hits` (best first) kept by collapsing and the floor, reading `hits` no further.

    At most `max_per_document` hits of each document are kept, in order (so its best ones stay); with
    `min_score`, hits end at the first whose `readable_score` is below it: the readable relevance never
    rises down a ranking (`app.retrieval.relevance.readable_relevance`), so nothing after it would pass.
    Reading stops once `limit` hits are kept, so a lazy `hits` computes only those. A page short of
    `limit` that collapsed hits and was not floored read every candidate: deeper ones could fill it.

    Raises `ValueError` when `max_per_document` is below 1 or `limit` below 0.
    """
    if max_per_document is not None and max_per_document < 1:
        msg = f"max_per_document must be >= 1, got {max_per_document}"
        raise ValueError(msg)
    if limit < 0:
        msg = f"limit must be >= 0, got {limit}"
        raise ValueError(msg)
    kept: list[FusedHit] = []
    kept_per_document: dict[str, int] = {}
    collapsed = 0
    if limit == 0:
        return ReturnedPage(kept)
    for hit in hits:
        if min_score is not None and hit.readable_score < min_score:
            return ReturnedPage(kept, collapsed=collapsed, floored=True)
        if max_per_document is not None:
            document_id = hit.chunk.document_id
            already = kept_per_document.get(document_id, 0)
            if already >= max_per_document:
                collapsed += 1
                continue
            kept_per_document[document_id] = already + 1
        kept.append(hit)
        if len(kept) == limit:
            break
    return ReturnedPage(kept, collapsed=collapsed)


def returned_hits(
    hits: Iterable[FusedHit], *, limit: int, max_per_document: int | None = None, min_score: float | None = None
) -> list[FusedHit]:
    """`returned_page(...).hits`: the hits alone."""
    return returned_page(hits, limit=limit, max_per_document=max_per_document, min_score=min_score).hits


def collapse_per_document(hits: Iterable[FusedHit], max_per_document: int) -> list[FusedHit]:
    """Keep at most `max_per_document` hits of each document, in order (so its best ones stay).

    Raises `ValueError` when `max_per_document` is below 1.
    """
    listed = list(hits)
    return returned_hits(listed, limit=len(listed), max_per_document=max_per_document)
