"""One search request end to end: optimize, plan, rollout arm, cache, execute, shape, record."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import msgspec
from opentelemetry import trace

from app.api.schemas import (
    STRATEGY_LABELS,
    SearchMetricsOut,
    SearchResponse,
    analysis_out,
    hit_out,
)
from app.domain.errors import AllEnginesFailedError
from app.domain.models import LEXICAL_LEG, SEMANTIC_LEG, SearchStrategy
from app.observability import (
    SPAN_ATTRIBUTE_ARM,
    SPAN_ATTRIBUTE_CACHED,
    SPAN_OPTIMIZE,
    SPAN_REQUEST,
    phase,
    record_rollout_assignment,
    record_search,
    record_shadow_overlap,
)
from app.operations.rollout import HYBRID_ARM, SEMANTIC_ARM, assign_arm, overlap_at_k
from app.query.planner import PlanDefaults, SearchOptions, build_plan, validate_query_text

if TYPE_CHECKING:
    from app.config import Settings
    from app.domain.models import QueryAnalysis, SearchPlan, SearchResult
    from app.operations.cache import QueryCache
    from app.operations.flags import Flags, FlagStore
    from app.query.optimizer import QueryOptimizer
    from app.retrieval.searcher import HybridSearcher

logger = logging.getLogger("poimen.search")

CONTROL_ARM = "control"
"""The arm label of requests that chose their strategy themselves: no rollout applies to them."""


@dataclass(frozen=True, slots=True)
class SearchCall:
    """One caller's search: the query, its options, and who is asking (for cache scope and rollout)."""

    query: str
    options: SearchOptions
    explain: bool
    auth_scope: str
    caller_key: str


class SearchService:
    """Runs searches for the HTTP layer; stateless apart from the cache and background shadow tasks."""

    def __init__(
        self,
        *,
        searcher: HybridSearcher,
        optimizer: QueryOptimizer,
        flags: FlagStore,
        cache: QueryCache[SearchResponse],
        settings: Settings,
    ) -> None:
        self._searcher = searcher
        self._optimizer = optimizer
        self._flags = flags
        self._cache = cache
        self._settings = settings
        self._shadow_tasks: set[asyncio.Task[None]] = set()
        self._applied_flags_version = -1
        self._apply_flags()

    def _apply_flags(self) -> Flags:
        """The flags in force; when their version changed, apply the ones that live outside a plan (cache TTL)."""
        flags = self._flags.current()
        version = self._flags.version
        if version != self._applied_flags_version:
            self._cache.set_ttl(flags.query_cache_ttl_secs)
            self._applied_flags_version = version
        return flags

    def _arm(self, call: SearchCall, flags: Flags) -> str:
        if call.options.strategy is not None:
            return CONTROL_ARM
        arm = assign_arm(call.caller_key, hybrid_percent=flags.hybrid_rollout_percent)
        record_rollout_assignment(arm)
        return arm

    def _plan(self, analysis: QueryAnalysis, options: SearchOptions, flags: Flags, arm: str) -> SearchPlan:
        if arm == SEMANTIC_ARM:
            options = replace(options, strategy=SearchStrategy.SEMANTIC)
        return build_plan(
            analysis,
            options,
            PlanDefaults.from_knobs(
                flags,
                entity_filters_enabled=self._settings.query_entity_extraction,
                routable_strategies=self._settings.routable_strategies,
            ),
        )

    async def search(self, call: SearchCall) -> SearchResponse:
        """Answer one search; raises `InvalidQueryError` for bad input, `AllEnginesFailedError` when no leg works.

        Everything runs under one `search.request` span; stages are its children (`search.optimize`,
        `search.embed`, `search.engine.<name>`, `search.fuse`), and `record_search` puts strategy,
        arm, outcome, result count and degraded reasons on it.
        """
        with phase(SPAN_REQUEST):
            return await self._search(call)

    async def _search(self, call: SearchCall) -> SearchResponse:
        started = time.perf_counter()
        validate_query_text(call.query)
        flags = self._apply_flags()
        arm = self._arm(call, flags)
        with phase(SPAN_OPTIMIZE, **{SPAN_ATTRIBUTE_ARM: arm}):
            optimize_started = time.perf_counter()
            analysis = self._optimizer.analyze(call.query)
            plan = self._plan(analysis, call.options, flags, arm)
            optimize_ms = (time.perf_counter() - optimize_started) * 1000
        key = self._cache.make_key(
            project_id=plan.filters.project_id,
            query=analysis.normalized,
            filters=plan.filters,
            strategy=plan.strategy.value,
            fusion=plan.fusion.method.value,
            weights=plan.fusion.weights,
            rrf_k=plan.fusion.rrf_k,
            limit=plan.limit,
            collapse=plan.max_chunks_per_document,
            min_score=plan.min_score,
            explain=call.explain,
            flags_version=self._flags.version,
            arm=arm,
            auth_scope=call.auth_scope,
            extra=(plan.retrieve_k, plan.cascading_multiplier, plan.lexical_query),
        )
        cached = self._cache.get(key)
        if cached is not None:
            return self._cached_response(cached, plan, arm=arm, optimize_ms=optimize_ms, started=started)
        try:
            result = await self._searcher.search(plan)
        except AllEnginesFailedError as error:
            stage_ms = {"optimize": optimize_ms, "total": (time.perf_counter() - started) * 1000}
            record_search(
                strategy=plan.strategy.value,
                arm=arm,
                outcome="error",
                stage_ms=stage_ms,
                degraded_reasons=error.reasons,
                result_count=0,
            )
            raise
        total_ms = (time.perf_counter() - started) * 1000
        response = self._response(call, analysis, plan, result, arm=arm, optimize_ms=optimize_ms, total_ms=total_ms)
        record_search(
            strategy=plan.strategy.value,
            arm=arm,
            outcome="degraded" if result.degraded else "ok",
            stage_ms={**result.stage_ms, "optimize": optimize_ms, "total": total_ms},
            degraded_reasons=result.degraded_reasons,
            result_count=len(result.hits),
        )
        if not result.degraded:
            # A degraded answer is not what the caller would get once the engine is back: never reuse it.
            self._cache.put(key, response)
        if flags.rollout_shadow_enabled and arm in {HYBRID_ARM, SEMANTIC_ARM}:
            self._start_shadow(call, analysis, flags, arm, [hit.chunk_id for hit in result.hits])
        return response

    @staticmethod
    def _cached_response(
        cached: SearchResponse, plan: SearchPlan, *, arm: str, optimize_ms: float, started: float
    ) -> SearchResponse:
        # A hit is still an answered query: counted with only the stages it ran (optimize, total).
        total_ms = (time.perf_counter() - started) * 1000
        record_search(
            strategy=plan.strategy.value,
            arm=arm,
            outcome="ok",
            stage_ms={"optimize": optimize_ms, "total": total_ms},
            result_count=len(cached.results),
        )
        span = trace.get_current_span()
        if span.is_recording():
            span.set_attribute(SPAN_ATTRIBUTE_CACHED, True)  # noqa: FBT003 - OTel's attribute API is positional
        metrics = msgspec.structs.replace(cached.metrics, total_time_ms=round(total_ms, 3))
        return msgspec.structs.replace(cached, cached=True, metrics=metrics)

    def _response(  # noqa: PLR0913 - assembling the wire shape needs every part of the search
        self,
        call: SearchCall,
        analysis: QueryAnalysis,
        plan: SearchPlan,
        result: SearchResult,
        *,
        arm: str,
        optimize_ms: float,
        total_ms: float,
    ) -> SearchResponse:
        # Only the hybrid strategy fuses; the others rank by one leg's own score (cascading: vector similarity).
        fusion_method = {
            SearchStrategy.HYBRID: result.fusion_method.value,
            SearchStrategy.CASCADING: "cascading",
        }.get(result.strategy, "none")
        semantic = result.legs.get(SEMANTIC_LEG)
        lexical = result.legs.get(LEXICAL_LEG)
        stage = result.stage_ms
        return SearchResponse(
            query=call.query,
            project=plan.filters.project_id,
            search_strategy=STRATEGY_LABELS[result.strategy],
            strategy_confidence=plan.strategy_confidence,
            results=[
                hit_out(hit, rank=rank, fusion_method=fusion_method, strategy=result.strategy)
                for rank, hit in enumerate(result.hits, start=1)
            ],
            metrics=SearchMetricsOut(
                total_time_ms=round(total_ms, 3),
                optimize_time_ms=round(optimize_ms, 3),
                embed_time_ms=round(stage.get("embed", 0.0), 3),
                semantic_time_ms=round(stage.get("semantic", 0.0), 3),
                lexical_time_ms=round(stage.get("lexical", 0.0), 3),
                fusion_time_ms=round(stage.get("fusion", 0.0), 3),
                semantic_results_count=semantic.result_count if semantic else 0,
                lexical_results_count=lexical.result_count if lexical else 0,
                final_results_count=len(result.hits),
            ),
            fusion_method=fusion_method,
            question_type=analysis.question_type.value,
            rollout_arm=arm,
            cached=False,
            degraded=result.degraded,
            degraded_reasons=list(result.degraded_reasons),
            query_analysis=analysis_out(analysis) if call.explain else None,
        )

    def _start_shadow(
        self, call: SearchCall, analysis: QueryAnalysis, flags: Flags, arm: str, served_ids: list[str]
    ) -> None:
        other_arm = SEMANTIC_ARM if arm == HYBRID_ARM else HYBRID_ARM
        plan = self._plan(analysis, call.options, flags, other_arm)

        async def shadow() -> None:
            # Its own span, linked to the request by parentage; it may end after the request span.
            with phase("search.shadow", **{SPAN_ATTRIBUTE_ARM: other_arm}):
                try:
                    result = await self._searcher.search(plan)
                except AllEnginesFailedError:
                    return
            record_shadow_overlap(overlap_at_k(served_ids, [hit.chunk_id for hit in result.hits], k=10))

        task = asyncio.get_running_loop().create_task(shadow())
        self._shadow_tasks.add(task)
        task.add_done_callback(self._shadow_tasks.discard)

    async def drain_shadow(self) -> None:
        """Wait for shadow searches still running (shutdown)."""
        if self._shadow_tasks:
            await asyncio.gather(*self._shadow_tasks, return_exceptions=True)
