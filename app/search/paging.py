"""Paged search: every page of one query is a slice of one ranking, so pages never repeat or skip a hit."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Final

from app.query.validation import MAX_LIMIT
from app.retrieval.legs import is_current

if TYPE_CHECKING:
    from collections.abc import Sequence

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
    rewritten since is left out of its page (`current_page_of`), never served from the old ranking.
    `speakers` are the query's names the first page read as the project's speakers (its common title names,
    `app/search/common_names.py`), from its cursor: a later page reading them again after a write (or past their
    few minutes) could plan, and rank, otherwise than its first page did (None: read them).
    `served` is the `served_digest` of the hits the earlier pages were cut from (the ranking's first `offset`):
    a ranking made again on another replica at the same generation can still differ (the lexical index is
    written before the outbox moves the generation on), and a later page then says `ranking_changed`.
    """

    offset: int = 0
    generation: int | None = None
    speakers: frozenset[str] | None = None
    served: str | None = None


def served_digest(chunk_ids: Sequence[str]) -> str:
    """A short digest of a ranking's first hits, in order: what a cursor says the earlier pages were cut from."""
    return hashlib.sha256("\x1f".join(chunk_ids).encode()).hexdigest()[:16]


def page_of(outcome: SearchOutcome, call: SearchCall, knobs: SearchKnobs) -> SearchOutcome:
    """The page `call` asked for, cut from the full ranking `outcome` holds (unpaged calls: as it is)."""
    if call.page is None:
        return outcome
    return _cut(outcome, call, knobs, list(range(call.page.offset, len(outcome.result.hits))))


async def current_page_of(
    outcome: SearchOutcome, call: SearchCall, knobs: SearchKnobs, truth: ChunkTruth
) -> SearchOutcome:
    """`page_of` a ranking made before a write, leaving out the hits the store no longer holds as ranked.

    Left out: a chunk deleted, rewritten (another text hash), or no longer meeting the search's filters (its
    tags, source or event time changed); the page fills from the hits after it, so it is as full as the
    ranking allows, and `next_offset` follows the last hit it holds. Ranks are positions in the pages
    served, so they never repeat across pages (one can be skipped). Raises the store's `EngineError`.
    """
    if call.page is None:
        return outcome
    hits = outcome.result.hits
    start = call.page.offset
    rest = hits[start:]
    filters = outcome.plan.filters
    current = await truth.existing_chunks(filters.project_id, [hit.chunk_id for hit in rest], filters=filters)
    fresh = [start + index for index, hit in enumerate(rest) if is_current(hit.chunk, current)]
    return _cut(outcome, call, knobs, fresh)


def _cut(outcome: SearchOutcome, call: SearchCall, knobs: SearchKnobs, positions: list[int]) -> SearchOutcome:
    """The page of the hits at `positions` (of the ranking, ascending, from the page's offset on).

    It says `ranking_changed` too when the ranking's hits before the page are not those the earlier pages
    were cut from (`SearchPage.served`), and carries the digest of the hits up to its end for the next page.
    """
    size = call.options.limit or knobs.rrf_final_k
    taken = positions[:size]
    following = taken[-1] + 1 if len(positions) > size else None
    ranked = [hit.chunk_id for hit in outcome.result.hits]
    page = call.page
    start = page.offset if page is not None else 0
    changed = page is not None and page.served is not None and served_digest(ranked[:start]) != page.served
    return replace(
        outcome,
        result=replace(outcome.result, hits=tuple(outcome.result.hits[position] for position in taken)),
        offset=start,
        next_offset=following,
        served_digest=None if following is None else served_digest(ranked[:following]),
        ranking_changed=outcome.ranking_changed or changed,
    )
