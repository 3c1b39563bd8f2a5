"""HybridSearcher: runs a `SearchPlan` against the ports, fuses, and degrades when an engine fails.

Strategies:
- HYBRID: the semantic leg (embed the query, then vector search) and the lexical leg run concurrently,
  `semantic_retrieve_k` / `lexical_retrieve_k` hits each, and are fused with `plan.fusion`.
- SEMANTIC / LEXICAL: one leg; the final score is that leg's own score.
- CASCADING: the lexical leg fetches `lexical_retrieve_k * cascading_multiplier` candidates (the query is
  embedded meanwhile), then the vector index ranks only those chunks; the final score is the vector
  similarity. With no lexical candidate at all, the vector search runs over the plan's filters alone.

Read-your-deletes: with a `truth` (the document store), lexical hits whose chunk PostgreSQL no longer
holds as indexed are dropped before fusion (the lexical index lags by the outbox). When the vector index
reads the truth's own rows (`ConfirmingVectorIndex`, pgvector), a search opens that read while it embeds
the query (`LegRunner.read_ahead`), and a hybrid search confirms the lexical hits in it: one PostgreSQL
transaction per search. With few searches in flight the read begins at once, and the confirmation runs as
soon as the lexical leg is done, usually before the embedding is; otherwise both wait for the vector search.

Each leg's call (timed, traced, recorded on the `SearchRun`) is `app/retrieval/leg_runs.py`; this module
decides which legs run, in what order, and what a missing one means.

Fallbacks: a failing or slow leg is dropped and named in `degraded_reasons`
(`{embedder,semantic,lexical}_{unavailable,timeout}`); a single-leg strategy whose leg fails runs the
other leg instead. When no leg is left, `AllEnginesFailedError` carries the reasons. Only `EngineError`s
and timeouts count as engine failures: any other exception is a bug and propagates.
"""

from __future__ import annotations

import itertools
import time
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Final, TypeAlias

from app.domain.errors import AllEnginesFailedError
from app.domain.labels import STAGE_FUSION, STAGE_RERANK, STAGE_TOTAL
from app.domain.models import LEXICAL_LEG, SEMANTIC_LEG, FusedHit, ScoredHit, SearchPlan, SearchStrategy
from app.domain.results import SearchResult
from app.observability.tracing import phase
from app.retrieval.diversity import cap_per_session
from app.retrieval.evidence import prefer_evidence
from app.retrieval.fusion import cascade_ranking, fuse, rank_single_leg
from app.retrieval.leg_runs import LegRunner, SearchRun, elapsed_ms
from app.retrieval.legs import both, in_leg_order
from app.retrieval.neighbours import share_neighbour_scores
from app.retrieval.postprocess import returned_page
from app.retrieval.relevance import bm25_half_for, readable_relevance
from app.retrieval.widening import deeper_plan, merged_runs, needs_deeper_candidates

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

    from app.domain.ports import ChunkTruth, Embedder, LexicalIndex, VectorIndex
    from app.retrieval.leg_runs import ReadAhead
    from app.retrieval.postprocess import ReturnedPage
    from app.retrieval.rerank import SecondStage

SPAN_FUSE: Final = "search.fuse"
SPAN_RERANK: Final = "search.rerank"


class HybridSearcher:
    """Executes search plans. Stateless: one instance serves concurrent requests."""

    def __init__(
        self,
        *,
        vector: VectorIndex,
        lexical: LexicalIndex,
        embedder: Embedder,
        truth: ChunkTruth | None = None,
        second_stage: SecondStage | None = None,
    ) -> None:
        self._truth = truth
        self._second_stage = second_stage
        self._legs = LegRunner(vector=vector, lexical=lexical, embedder=embedder, truth=truth)

    async def search(self, plan: SearchPlan, *, query_embedding: Sequence[float] | None = None) -> SearchResult:
        """Run `plan` and return at most `plan.limit` hits, best first.

        `query_embedding`: `plan.semantic_text` already embedded by `Embedder.embed_queries` (a batch of
        searches embeds once); without it the semantic leg embeds the text itself.

        After ranking, the plan's evidence boosts, neighbour sharing and per-session cap re-order the hits; then they
        are collapsed to `plan.max_chunks_per_document` per document (when set), then those below `plan.min_score`
        dropped, then cut to `plan.limit`; a second stage re-orders the collapsed hits before the floor drops any.
        When collapsing left the page short although a leg returned all it was asked for, the search runs again
        deeper (`app/retrieval/widening.py`), reusing the query's embedding; its stage times then add up both
        searches; a deeper page that `min_score` leaves with fewer hits is dropped for the first. `stage_ms` holds
        "embed", "semantic" (the vector search alone: its read of the store opens during the embedding), "lexical"
        (the lexical search and its hits' confirmation), "fusion" (fusion and post-processing), "rerank" (the second
        stage, when one is configured and the plan is hybrid) for the stages that ran, and always "total". `legs` holds
        each attempted leg; the semantic leg's time includes embedding. Raises `AllEnginesFailedError` when no leg
        produced results.
        """
        started = time.perf_counter()
        second_stage = self._second_stage if self._second_stage and self._second_stage.applies_to(plan) else None
        depth = plan.limit if second_stage is None else max(plan.limit, second_stage.top_n)
        run = SearchRun(query_embedding=query_embedding)
        page, head = await self._page(plan, run, depth=depth, unfloored_head=second_stage is not None)
        searched = plan
        while needs_deeper_candidates(page, searched, run):
            deeper = deeper_plan(searched)
            if deeper is None:
                break
            deeper_run = SearchRun(query_embedding=run.embedding)
            try:
                deeper_page, deeper_head = await self._page(
                    deeper, deeper_run, depth=depth, unfloored_head=second_stage is not None
                )
            except AllEnginesFailedError:
                break
            if deeper_run.reasons:  # a deeper search that lost a leg answers no better: the first one stands
                break
            if len(deeper_page.hits) < len(page.hits):
                # `min_score` ended it sooner: a deeper hit ranked above one the page held caps the relevance
                # below it, so asking for more documents would return fewer. The first one stands.
                break
            run, page, head, searched = merged_runs(run, deeper_run), deeper_page, deeper_head, deeper
        hits = page.hits
        if second_stage is not None:
            # The second stage orders the hits as if there were no floor, then the floor drops those below it:
            # the learned ranker normalises over the candidates it is shown, so shown only those `min_score`
            # kept it ordered (and scored) them otherwise. The floor's hits are the head's above it, in any order.
            reranked = await self._rerank(second_stage, plan, head, run)
            kept = {hit.chunk_id for hit in hits}
            hits = [hit for hit in reranked if hit.chunk_id in kept]
        run.stage_ms[STAGE_TOTAL] = elapsed_ms(started)
        return SearchResult(
            hits=tuple(hits[: plan.limit]),
            strategy=plan.strategy,
            fusion_method=plan.fusion.method,
            legs=dict(run.legs),
            stage_ms=dict(run.stage_ms),
            degraded_reasons=tuple(run.reasons),
            leg_hits=dict(run.leg_hits),
        )

    async def _page(
        self, plan: SearchPlan, run: SearchRun, *, depth: int, unfloored_head: bool = False
    ) -> tuple[ReturnedPage, list[FusedHit]]:
        """Run the plan's strategy, rank, and keep the first `depth` hits after collapsing and the floor.

        Also returns the first `depth` hits as collapsing alone keeps them (`unfloored_head`, for the second
        stage), or the page's hits again: the floor's are a prefix of them, the relevance never rising down.
        """
        strategy_runs = {
            SearchStrategy.HYBRID: self._hybrid,
            SearchStrategy.SEMANTIC: self._semantic_only,
            SearchStrategy.LEXICAL: self._lexical_only,
            SearchStrategy.CASCADING: self._cascading,
        }
        ranked = await strategy_runs[plan.strategy](plan, run)
        fusion_started = time.perf_counter()
        with phase(SPAN_FUSE):
            # Evidence and diversity re-order before the readable relevance is read, so it still never
            # rises down the list and `min_score` still cuts a prefix.
            hits = share_neighbour_scores(prefer_evidence(ranked(), plan.evidence), plan.neighbours)
            if plan.session_cap:
                hits = cap_per_session(hits, plan.session_cap)
            # Lazy: only the hits a page (or the second stage) can use get a relevance, not all ~100 candidates.
            bm25_half = bm25_half_for(plan.lexical_query)
            readable = readable_relevance(
                hits, legs=tuple(run.leg_hits), weights=plan.fusion.weights, bm25_half=bm25_half
            )
            collapse = plan.max_chunks_per_document or None
            floored = unfloored_head and plan.min_score is not None
            readable, unfloored = itertools.tee(readable) if floored else (readable, iter(()))
            page = returned_page(readable, limit=depth, max_per_document=collapse, min_score=plan.min_score)
            head = returned_page(unfloored, limit=depth, max_per_document=collapse).hits if floored else page.hits
        run.stage_ms[STAGE_FUSION] = elapsed_ms(fusion_started)
        return page, head

    @staticmethod
    async def _rerank(stage: SecondStage, plan: SearchPlan, hits: list[FusedHit], run: SearchRun) -> list[FusedHit]:
        """The second stage over the fused top-N (`app/retrieval/rerank.py`), timed as the "rerank" stage."""
        with phase(SPAN_RERANK):
            outcome = await stage.apply(plan, hits)
        run.stage_ms[STAGE_RERANK] = outcome.elapsed_ms
        if outcome.reason is not None:
            run.reasons.append(outcome.reason)
        return outcome.hits

    # Each strategy returns a thunk that ranks, so that ranking is timed as the "fusion" stage.

    async def _hybrid(self, plan: SearchPlan, run: SearchRun) -> _Ranking:
        async with self._legs.read_ahead(plan, confirm_after_search=True) as read:
            with _reasons_in_leg_order(run):
                semantic_hits, lexical_hits = await both(
                    self._legs.semantic(plan, run, top_k=plan.semantic_retrieve_k, filters=plan.filters, read=read),
                    self._legs.lexical(plan, run, top_k=plan.lexical_retrieve_k, read=read),
                )
        ranked = {
            leg: hits for leg, hits in ((SEMANTIC_LEG, semantic_hits), (LEXICAL_LEG, lexical_hits)) if hits is not None
        }
        if not ranked:
            raise _all_failed(run)
        return lambda: fuse(ranked, plan.fusion)

    async def _semantic_only(self, plan: SearchPlan, run: SearchRun) -> _Ranking:
        async with self._legs.read_ahead(plan) as read:
            hits = await self._legs.semantic(plan, run, top_k=plan.semantic_retrieve_k, filters=plan.filters, read=read)
        if hits is not None:
            return _single(hits, SEMANTIC_LEG)
        return await self._fallback_to_lexical(plan, run)

    async def _lexical_only(self, plan: SearchPlan, run: SearchRun) -> _Ranking:
        hits = await self._legs.lexical(plan, run, top_k=plan.lexical_retrieve_k)
        if hits is not None:
            return _single(hits, LEXICAL_LEG)
        hits = await self._legs.semantic(plan, run, top_k=plan.semantic_retrieve_k, filters=plan.filters)
        if hits is None:
            raise _all_failed(run)
        return _single(hits, SEMANTIC_LEG)

    async def _fallback_to_lexical(self, plan: SearchPlan, run: SearchRun) -> _Ranking:
        hits = await self._legs.lexical(plan, run, top_k=plan.lexical_retrieve_k)
        if hits is None:
            raise _all_failed(run)
        return _single(hits, LEXICAL_LEG)

    async def _cascading(self, plan: SearchPlan, run: SearchRun) -> _Ranking:
        async with self._legs.read_ahead(plan) as read:
            return await self._cascade(plan, run, read)

    async def _cascade(self, plan: SearchPlan, run: SearchRun, read: ReadAhead | None) -> _Ranking:
        with _reasons_in_leg_order(run):
            embedding, lexical_hits = await both(
                self._legs.embed(plan, run),
                self._legs.lexical(plan, run, top_k=plan.lexical_retrieve_k * plan.cascading_multiplier, read=read),
            )
        if embedding is None:
            self._legs.record_semantic(run, hits=None)
            if lexical_hits is None:
                raise _all_failed(run)
            return _single(lexical_hits, LEXICAL_LEG)
        if lexical_hits is None:  # lexical stage failed: rank over the filters alone
            semantic_hits = await self._legs.vector_search(
                plan, run, embedding, top_k=plan.semantic_retrieve_k, filters=plan.filters, read=read
            )
            if semantic_hits is None:
                raise _all_failed(run)
            return _single(semantic_hits, SEMANTIC_LEG)
        candidate_ids = tuple(dict.fromkeys(hit.chunk_id for hit in lexical_hits))
        if not candidate_ids:  # nothing to narrow to; semantic search still sees every matching chunk
            semantic_hits = await self._legs.vector_search(
                plan, run, embedding, top_k=plan.semantic_retrieve_k, filters=plan.filters, read=read
            )
            return _single(semantic_hits, SEMANTIC_LEG) if semantic_hits is not None else _single([], LEXICAL_LEG)
        restricted = replace(plan.filters, chunk_ids=candidate_ids)
        semantic_hits = await self._legs.vector_search(
            plan, run, embedding, top_k=len(candidate_ids), filters=restricted, read=read
        )
        if semantic_hits is None:
            return _single(lexical_hits, LEXICAL_LEG)
        return lambda: cascade_ranking(semantic_hits, lexical_hits)


_Ranking: TypeAlias = "Callable[[], list[FusedHit]]"


def _single(hits: Sequence[ScoredHit], leg: str) -> _Ranking:
    return lambda: rank_single_leg(hits, leg=leg)


@contextmanager
def _reasons_in_leg_order(run: SearchRun) -> Iterator[None]:
    """The reasons legs running at once add, in the legs' order (`in_leg_order`), not the order they failed in.

    Reasons added one after the other (a single-leg strategy's fallback) keep theirs: it says what was tried first.
    """
    before = len(run.reasons)
    try:
        yield
    finally:
        run.reasons[before:] = in_leg_order(run.reasons[before:])


def _all_failed(run: SearchRun) -> AllEnginesFailedError:
    reasons = tuple(run.reasons)
    return AllEnginesFailedError(f"every search engine failed: {', '.join(reasons)}", reasons=reasons)
