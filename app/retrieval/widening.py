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
    return any(leg in run.legs and run.legs[leg].result_count >= top_k for leg, top_k in _asked(plan).items())


def deeper_plan(plan: SearchPlan) -> SearchPlan | None:
    """`plan` with `WIDENING_FACTOR` times the candidates per leg, none asked past the bound; None once none can grow.

    The bound is on what a leg is asked for: a cascading search's lexical leg fetches `lexical_retrieve_k *
    cascading_multiplier` (its vector search ranks those), so there `lexical_retrieve_k` grows to the bound
    divided by the multiplier (50, 200, 250 at 4: 200, 800, 1,000 candidates), never beyond it.
    """
    if plan.strategy is SearchStrategy.CASCADING:
        most = max(plan.lexical_retrieve_k, MAX_WIDENED_RETRIEVE_K // plan.cascading_multiplier)
        deeper = replace(plan, lexical_retrieve_k=min(plan.lexical_retrieve_k * WIDENING_FACTOR, most))
    else:
        deeper = replace(
            plan,
            semantic_retrieve_k=_widened(plan.semantic_retrieve_k),
            lexical_retrieve_k=_widened(plan.lexical_retrieve_k),
        )
    return None if _asked(deeper) == _asked(plan) else deeper


def _widened(retrieve_k: int) -> int:
    return max(retrieve_k, min(retrieve_k * WIDENING_FACTOR, MAX_WIDENED_RETRIEVE_K))


def _asked(plan: SearchPlan) -> dict[str, int]:
    """How many hits each leg whose hits are the candidates is asked for (cascading: the lexical leg's)."""
    asked = {
        SearchStrategy.HYBRID: {SEMANTIC_LEG: plan.semantic_retrieve_k, LEXICAL_LEG: plan.lexical_retrieve_k},
        SearchStrategy.SEMANTIC: {SEMANTIC_LEG: plan.semantic_retrieve_k},
        SearchStrategy.LEXICAL: {LEXICAL_LEG: plan.lexical_retrieve_k},
        SearchStrategy.CASCADING: {LEXICAL_LEG: plan.lexical_retrieve_k * plan.cascading_multiplier},
    }
    return asked[plan.strategy]


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
