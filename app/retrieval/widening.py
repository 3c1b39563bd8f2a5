"""Deeper candidates for a collapsed page: when one document's chunks crowd the top, fetch further down.

Collapsing (`max_chunks_per_document`) keeps a few chunks of each document out of the candidates the legs
fetched (`semantic_retrieve_k` / `lexical_retrieve_k`, 50 by default). When the best 50 chunks belong to a
handful of documents, a page of 10 came back with fewer hits although more documents matched further
down. Such a page (short, collapsed, not ended by `min_score`, from a leg that returned all it was asked
for, so it may hold more) is searched again with `WIDENING_FACTOR` times the candidates, up to
`MAX_WIDENED_RETRIEVE_K`. A page that fills at once, the common case, is searched once.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Final

from app.domain.models import LEXICAL_LEG, SEMANTIC_LEG, SearchStrategy

if TYPE_CHECKING:
    from app.domain.models import SearchPlan
    from app.retrieval.leg_runs import SearchRun
    from app.retrieval.postprocess import ReturnedPage

WIDENING_FACTOR: Final = 4
"""Each deeper search fetches this many times the candidates of the last: 50, 200, 800, then the bound."""
MAX_WIDENED_RETRIEVE_K: Final = 1000
"""The deepest a leg is asked to fetch for a collapsed page: the planner's own bound on `retrieve_k`, and
pgvector's on `hnsw.ef_search`. A page still short there is returned short."""


def needs_deeper_candidates(page: ReturnedPage, plan: SearchPlan, run: SearchRun) -> bool:
    """Whether `page` holds fewer than `plan.limit` hits only because collapsing used up the candidates.

    And a leg may hold more: it returned as many hits as it was asked for (a cascading search's candidates
    are the lexical leg's, so only that leg counts there). Not for a degraded search (a lost leg is not
    fixed by asking the other for more), nor for a page that `min_score` ended. The page's own length is
    what counts, not the second stage's candidates beyond it: a full page is never searched again.
    """
    if len(page.hits) >= plan.limit or not page.collapsed or page.floored or run.reasons:
        return False
    if plan.strategy is SearchStrategy.CASCADING:
        asked = {LEXICAL_LEG: plan.lexical_retrieve_k * plan.cascading_multiplier}
    else:
        asked = {SEMANTIC_LEG: plan.semantic_retrieve_k, LEXICAL_LEG: plan.lexical_retrieve_k}
    return any(leg in run.legs and run.legs[leg].result_count >= top_k for leg, top_k in asked.items())


def deeper_plan(plan: SearchPlan) -> SearchPlan | None:
    """`plan` with `WIDENING_FACTOR` times the candidates per leg (at most the bound); None once at the bound."""
    if max(plan.semantic_retrieve_k, plan.lexical_retrieve_k) >= MAX_WIDENED_RETRIEVE_K:
        return None
    return replace(
        plan,
        semantic_retrieve_k=min(plan.semantic_retrieve_k * WIDENING_FACTOR, MAX_WIDENED_RETRIEVE_K),
        lexical_retrieve_k=min(plan.lexical_retrieve_k * WIDENING_FACTOR, MAX_WIDENED_RETRIEVE_K),
    )


def merged_runs(first: SearchRun, deeper: SearchRun) -> SearchRun:
    """The deeper search's run (its legs, rankings and reasons are the answer's) timed as both searches together."""
    stage_ms = {
        stage: first.stage_ms.get(stage, 0.0) + deeper.stage_ms.get(stage, 0.0)
        for stage in dict.fromkeys([*first.stage_ms, *deeper.stage_ms])
    }
    legs = {
        leg: replace(timing, elapsed_ms=timing.elapsed_ms + first.legs[leg].elapsed_ms) if leg in first.legs else timing
        for leg, timing in deeper.legs.items()
    }
    return replace(deeper, stage_ms=stage_ms, legs=legs, embedding=first.embedding or deeper.embedding)
