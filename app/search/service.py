"""The search use case: optimize, plan, rollout arm, cache, execute, record. The one query path.

The HTTP layer and the evaluation both call `SearchService.search`; it returns a domain
`SearchOutcome`, which the HTTP layer shapes into the wire response.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from typing import TYPE_CHECKING

from app.domain.errors import AllEnginesFailedError, InvalidQueryError
from app.domain.labels import CONTROL_ARM, HYBRID_ARM, NO_ARM, SEMANTIC_ARM, STAGE_OPTIMIZE, STAGE_TOTAL
from app.domain.models import SearchStrategy
from app.observability.metrics import current_arm, record_rollout_assignment, record_search
from app.observability.spans import SPAN_ATTRIBUTE_ARM, SPAN_OPTIMIZE, SPAN_REQUEST
from app.observability.tracing import phase
from app.query.optimizer import QueryOptimizer
from app.query.planner import SearchOptions, build_plan, without_fusion_options
from app.query.validation import validate_options, validate_query_text
from app.retrieval.searcher import HybridSearcher
from app.search.batch_embedding import embed_batch
from app.search.cache import Generations, QueryCache
from app.search.cached_answer import cached_outcome
from app.search.calls import ARM_BY_FLAGS, ARM_BY_REQUEST, ARM_BY_SERVICE, SearchCall, SearchOutcome
from app.search.common_names import CommonNames
from app.search.paging import PAGE_DEPTH, current_page_of, page_of
from app.search.prepared import PreparedSearch, cache_key
from app.search.rollout import assign_arm
from app.search.shadow import ShadowSearches

if TYPE_CHECKING:
    from collections.abc import Sequence

    from app.domain.models import QueryAnalysis, SearchPlan
    from app.domain.ports import ChunkTruth, DocumentStore, Embedder, LexicalIndex, VectorIndex
    from app.knobs import SearchKnobs
    from app.retrieval.rerank import SecondStage
    from app.search.knob_source import KnobSource, ResolvedKnobs


class SearchService:
    """Runs searches; stateless apart from the cache and background shadow searches."""

    def __init__(  # noqa: PLR0913 - the collaborators, each named
        self,
        *,
        searcher: HybridSearcher,
        optimizer: QueryOptimizer,
        knobs: KnobSource,
        cache: QueryCache[SearchOutcome],
        generations: Generations | None = None,
        query_embedder: Embedder | None = None,
        common_names: CommonNames | None = None,
        truth: ChunkTruth | None = None,
    ) -> None:
        self._searcher = searcher
        self._truth = truth
        self._common = common_names
        self._query_embedder = query_embedder
        self._optimizer = optimizer
        self._knobs = knobs
        self._cache = cache
        self._generations = generations
        self._shadows = ShadowSearches(searcher)
        self._applied_knobs_version = knobs.version
        self._cache.set_ttl(knobs.current().query_cache_ttl_secs)

    @classmethod
    def over(  # noqa: PLR0913 - the ports and the two settings sources, each named
        cls,
        *,
        vector: VectorIndex,
        lexical: LexicalIndex,
        embedder: Embedder,
        store: DocumentStore,
        knobs: KnobSource,
        cache: QueryCache[SearchOutcome] | None = None,
        second_stage: SecondStage | None = None,
        optimizer: QueryOptimizer | None = None,
    ) -> SearchService:
        """The service over these ports with the optimizer's own clock; no cache unless one is given.

        The store is the source of truth the lexical hits are checked against, the cache's generations, and
        where the project's common names are read (`app/search/common_names.py`).
        `second_stage`: the reranker of hybrid searches (`RERANKER`), none by default.
        `optimizer`: one with the deployment's vocabulary (`app/wiring/vocabulary.py`); the bundled table by default.
        """
        return cls(
            searcher=HybridSearcher(
                vector=vector, lexical=lexical, embedder=embedder, truth=store, second_stage=second_stage
            ),
            optimizer=optimizer if optimizer is not None else QueryOptimizer(),
            knobs=knobs,
            cache=cache if cache is not None else QueryCache(ttl_s=0, max_size=0),
            generations=store,
            query_embedder=embedder,
            common_names=CommonNames(store),
            truth=store,
        )

    def _apply_knobs(self, call: SearchCall) -> ResolvedKnobs:
        """The knobs for this call; when the source's version changed, apply the process-wide ones (cache TTL).

        The TTL is one per cache, so it is read without a caller context (`current()`), never per caller.
        """
        resolved = self._knobs.resolve(call.flag_context)
        if resolved.version != self._applied_knobs_version:
            self._cache.set_ttl(self._knobs.current().query_cache_ttl_secs)
            self._applied_knobs_version = resolved.version
        return resolved

    def rollout_arm(self, call: SearchCall, resolved: ResolvedKnobs | None = None) -> tuple[str, str]:
        """(arm, decided_by) for this call, with the knobs resolved for it (resolved now when not given).

        A request that names its strategy is `control`; else the flag system's own split when it made
        one for this caller, else SHA-256 bucketing by `hybrid_rollout_percent`. Both are sticky per caller
        and equal on every replica. Not counted: `search` counts the arm it serves.
        """
        if call.options.strategy is not None:
            return CONTROL_ARM, ARM_BY_REQUEST
        resolved = resolved if resolved is not None else self._knobs.resolve(call.flag_context)
        if resolved.arm is not None:
            return resolved.arm, ARM_BY_FLAGS
        return assign_arm(call.caller_key, hybrid_percent=resolved.knobs.hybrid_rollout_percent), ARM_BY_SERVICE

    @staticmethod
    def _plan(
        analysis: QueryAnalysis, options: SearchOptions, knobs: SearchKnobs, arm: str, common_names: frozenset[str]
    ) -> SearchPlan:
        if arm == SEMANTIC_ARM:
            # The arm is the service's choice, not the caller's: fusion options go unused, never refused.
            options = replace(without_fusion_options(options), strategy=SearchStrategy.SEMANTIC)
        return build_plan(analysis, options, knobs, common_names=common_names)

    async def _common_names(
        self, analysis: QueryAnalysis, call: SearchCall, share: float, *, generation: int | None
    ) -> frozenset[str]:
        """The project's common title words at `generation` if the query may name anyone; a later page: the first's."""
        if call.page is not None and call.page.speakers is not None:
            return call.page.speakers
        if self._common is None or not (analysis.names or analysis.name_candidates) or share <= 0:
            return frozenset()
        if generation is None and not self._cache.enabled:  # not read for the cache key
            generation = await self._cache.generation_or_none(self._generations, call.options.project)
        return await self._common.of(call.options.project, min_share=share, generation=generation)

    async def search(self, call: SearchCall) -> SearchOutcome:
        """Answer one search; raises `InvalidQueryError` for bad input, `AllEnginesFailedError` when no leg works.

        Everything runs under one `search.request` span; stages are its children (`search.optimize`,
        `search.embed`, `search.engine.<name>`, `search.fuse`), and `record_search` puts strategy,
        arm, outcome, result count and degraded reasons on it.
        """
        with phase(SPAN_REQUEST):
            try:
                return await self._search(call)
            finally:
                current_arm.set(NO_ARM)

    async def search_batch(self, calls: Sequence[SearchCall]) -> list[SearchOutcome]:
        """Answer several searches, in order; the queries that need an embedding are embedded in one batch.

        Each answer is what `search` gives for its call (same plan, cache and rollout arm). Invalid input in
        any call raises before anything runs. When the batch embedding fails, each search embeds on its own
        (and degrades as `search` does).
        """
        with phase(SPAN_REQUEST):
            try:
                prepared = [await self._prepare_item(index, call) for index, call in enumerate(calls)]
                embeddings = await self._embed_batch([p for p in prepared if p.cached is None])
                return list(
                    await asyncio.gather(*(self._run(p, embeddings.get(p.plan.semantic_text)) for p in prepared))
                )
            finally:
                current_arm.set(NO_ARM)

    async def _prepare_item(self, index: int, call: SearchCall) -> PreparedSearch:
        try:
            return await self._prepare(call)
        except InvalidQueryError as error:
            # Name the query of the batch: `queries[2].query`, "queries[2]: query must not be empty".
            raise error.of_item(index, list_field="queries") from None

    async def _embed_batch(self, prepared: Sequence[PreparedSearch]) -> dict[str, list[float]]:
        """Embed every semantic text of the batch together, each call within the semantic leg's deadline.

        A call carries at most one longest query's text (`QUERY_MAX_CHARS`), so a full batch of long
        queries is not held to one query's deadline (`app/search/batch_embedding.py`). A text it could not
        embed (a failure or timeout) is left out: its search embeds on its own and degrades as `search` does.
        """
        semantic = [p for p in prepared if p.plan.strategy is not SearchStrategy.LEXICAL]
        texts = list(dict.fromkeys(p.plan.semantic_text for p in semantic))
        if not texts or self._query_embedder is None:
            return {}
        return await embed_batch(
            self._query_embedder,
            texts,
            scope=semantic[0].plan.filters.project_id,
            # The longest of the knobs and deadlines: each call serves searches of every plan of the batch.
            max_chars=max(p.resolved.knobs.query_max_chars for p in semantic),
            timeout_s=max(p.plan.semantic_timeout_s for p in semantic),
        )

    async def _search(self, call: SearchCall) -> SearchOutcome:
        return await self._run(await self._prepare(call), None)

    async def _prepare(self, call: SearchCall) -> PreparedSearch:
        started = time.perf_counter()
        resolved = self._apply_knobs(call)
        knobs = resolved.knobs
        validate_query_text(call.query, max_chars=knobs.query_max_chars)
        options = call.options if call.page is None else replace(call.options, limit=PAGE_DEPTH)
        # Refused before it counts in the rollout or reads anything for its plan (the project's common names).
        validate_options(options)
        arm, decided_by = self.rollout_arm(call, resolved)
        if arm != CONTROL_ARM:
            record_rollout_assignment(arm, decided_by=decided_by)
        current_arm.set(arm)  # engine errors of this search count under its arm
        # One read for the cache key and the common names: neither serves what was read before a write it has seen.
        # With the cache off only a query naming someone needs it (`_common_names` reads it then).
        enabled = self._cache.enabled
        generation = await self._cache.generation_or_none(self._generations, options.project) if enabled else None
        with phase(SPAN_OPTIMIZE, **{SPAN_ATTRIBUTE_ARM: arm}):
            optimize_started = time.perf_counter()
            classify, share = knobs.query_question_classification, knobs.semantic_common_name_share
            analysis = self._optimizer.analyze(call.query, now=call.as_of, classify=classify)
            common_names = await self._common_names(analysis, call, share, generation=generation)
            if speakers := common_names.intersection(analysis.name_candidates):  # "What did May say?": her, no month
                analysis = self._optimizer.analyze(call.query, now=call.as_of, classify=classify, known_names=speakers)
            plan = self._plan(analysis, options, knobs, arm, common_names)
            optimize_ms = (time.perf_counter() - optimize_started) * 1000
        key, generation = cache_key(self._cache, call, analysis, plan, arm, resolved, generation=generation)
        cached = self._cache.get(key) if key is not None else None
        pinned = ranking_changed = False
        if call.page is not None and call.page.generation is not None and call.page.generation != generation:
            # A later page: the ranking its first page was cut from, if the cache still holds it.
            pinned_key, _ = cache_key(self._cache, call, analysis, plan, arm, resolved, generation=call.page.generation)
            snapshot = self._cache.get(pinned_key) if pinned_key is not None else None
            if snapshot is not None:
                cached, generation, pinned = snapshot, call.page.generation, True
            else:  # written to since, and the ranking of then is not here: this page is cut from today's
                ranking_changed = True
        if cached is not None:
            cached = replace(cached, arm_decided_by=decided_by)
        fields = (analysis, plan, optimize_ms, key, generation, cached, common_names, pinned, ranking_changed)
        return PreparedSearch(call, started, resolved, arm, decided_by, *fields)

    async def _run(self, prepared: PreparedSearch, query_embedding: list[float] | None) -> SearchOutcome:
        call, plan, arm = prepared.call, prepared.plan, prepared.arm
        if prepared.cached is not None:
            outcome = cached_outcome(
                prepared.cached,
                analysis=prepared.analysis,
                arm=arm,
                optimize_ms=prepared.optimize_ms,
                started=prepared.started,
            )
            knobs = prepared.resolved.knobs
            outcome = replace(outcome, generation=prepared.generation, ranking_changed=prepared.ranking_changed)
            if prepared.pinned and self._truth is not None:
                # Written to since that ranking: what was deleted or rewritten meanwhile is not served from it.
                return await current_page_of(outcome, call, knobs, self._truth)
            return page_of(outcome, call, knobs)
        current_arm.set(arm)
        try:
            result = await self._searcher.search(plan, query_embedding=query_embedding)
        except AllEnginesFailedError as error:
            stage_ms = {
                STAGE_OPTIMIZE: prepared.optimize_ms,
                STAGE_TOTAL: (time.perf_counter() - prepared.started) * 1000,
            }
            record_search(
                strategy=plan.strategy.value,
                arm=arm,
                outcome="error",
                stage_ms=stage_ms,
                degraded_reasons=error.reasons,
                result_count=0,
            )
            raise
        total_ms = (time.perf_counter() - prepared.started) * 1000
        outcome = SearchOutcome(
            analysis=prepared.analysis,
            plan=plan,
            result=result,
            arm=arm,
            cached=False,
            optimize_ms=prepared.optimize_ms,
            total_ms=total_ms,
            arm_decided_by=prepared.decided_by,
            generation=prepared.generation,
            speakers=prepared.common_names.intersection(prepared.analysis.names),
        )
        record_search(
            strategy=plan.strategy.value,
            arm=arm,
            outcome="degraded" if result.degraded else "ok",
            stage_ms={**result.stage_ms, STAGE_OPTIMIZE: prepared.optimize_ms, STAGE_TOTAL: total_ms},
            degraded_reasons=result.degraded_reasons,
            result_count=len(result.hits),
        )
        if prepared.key is not None and not result.degraded:
            # A degraded answer is not what the caller would get once the engine is back: never reuse it.
            self._cache.put(prepared.key, outcome)
        knobs = prepared.resolved.knobs
        if knobs.rollout_shadow_enabled and arm in {HYBRID_ARM, SEMANTIC_ARM}:
            self._start_shadow(prepared, knobs, arm, [hit.chunk_id for hit in result.hits])
        # Not in the cached answer: a first page served from it later has no earlier ranking to differ from.
        return page_of(replace(outcome, ranking_changed=prepared.ranking_changed), call, knobs)

    def _start_shadow(self, served: PreparedSearch, knobs: SearchKnobs, arm: str, served_ids: list[str]) -> None:
        other_arm = SEMANTIC_ARM if arm == HYBRID_ARM else HYBRID_ARM
        # The served search's common names: the shadow compares arms, not two readings of the query.
        plan = self._plan(served.analysis, served.call.options, knobs, other_arm, served.common_names)
        self._shadows.start(plan, other_arm=other_arm, served_ids=served_ids)

    async def drain_shadow(self) -> None:
        """Wait for shadow searches still running (shutdown)."""
        await self._shadows.drain()
