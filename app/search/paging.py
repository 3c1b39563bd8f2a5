"""Paged search: every page of one query is a slice of one ranking, so pages never repeat or skip a hit."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Final

from app.query.planner import MAX_LIMIT

if TYPE_CHECKING:
    from app.domain.ports import ChunkTruth
    from app.knobs import SearchKnobs
    from app.search.calls import SearchCall, SearchOutcome

PAGE_DEPTH: Final = MAX_LIMIT
"""How deep the one ranking every page of a paged search is cut from goes (hits past it are not served)."""


@dataclass(frozen=True, slots=True)
class SearchPage:
    """Ask for one page of a ranking: the hits at 0-based `offset` onwards (`options.limit` of them).

    Every page of one query is cut from the same ranking, `PAGE_DEPTH` hits deep (the plan does not change
    with the page, so neither does the ranking). `generation` is the project's generation the first page
    was ranked at (from its cursor): while the query cache still holds that ranking, later pages are cut
    from it even after a write, so pages never repeat or skip a hit; a hit whose document was deleted or
    rewritten since is left out of its page (`current_hits`), never served from the old ranking.
    """

    offset: int = 0
    generation: int | None = None


def page_of(outcome: SearchOutcome, call: SearchCall, knobs: SearchKnobs) -> SearchOutcome:
    """The page `call` asked for, cut from the full ranking `outcome` holds (unpaged calls: as it is)."""
    if call.page is None:
        return outcome
    size = call.options.limit or knobs.rrf_final_k
    start = call.page.offset
    hits = outcome.result.hits
    following = start + size if start + size < len(hits) else None
    return replace(
        outcome,
        result=replace(outcome.result, hits=hits[start : start + size]),
        offset=start,
        next_offset=following,
    )


async def current_hits(page: SearchOutcome, truth: ChunkTruth) -> SearchOutcome:
    """`page` less the hits whose chunk the store no longer holds as ranked.

    Left out: a chunk deleted, rewritten (another text hash), or no longer meeting the search's filters (its
    tags, source or event time changed).

    For a page cut from a ranking made before a write (`SearchPage.generation`): nothing deleted since is
    served. The page may be shorter than asked; its later hits move up, so ranks never repeat across pages
    but one may be missing at a page's end. Raises the store's `EngineError`.
    """
    hits = page.result.hits
    if not hits:
        return page
    filters = page.plan.filters
    current = await truth.existing_chunks(filters.project_id, [hit.chunk_id for hit in hits], filters=filters)
    kept = tuple(
        hit
        for hit in hits
        if hit.chunk_id in current and (not hit.chunk.chunk_hash or current[hit.chunk_id] == hit.chunk.chunk_hash)
    )
    return page if len(kept) == len(hits) else replace(page, result=replace(page.result, hits=kept))
