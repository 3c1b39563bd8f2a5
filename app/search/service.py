"""The search use case: optimize, plan, rollout arm, cache, execute, record. The one query path.

The HTTP layer and the evaluation both call `SearchService.search`; it returns a domain
`SearchOutcome`, which the HTTP layer shapes into the wire response.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Protocol

from opentelemetry import trace

from app.domain.errors import AllEnginesFailedError, EngineError
from app.domain.labels import CONTROL_ARM, HYBRID_ARM, NO_ARM, SEMANTIC_ARM, STAGE_OPTIMIZE, STAGE_TOTAL
from app.domain.models import SearchStrategy
from app.observability.metrics import (
    current_arm,
    record_rollout_assignment,
    record_search,
    record_shadow_overlap,
    record_shadow_search,
)
from app.observability.spans import SPAN_ATTRIBUTE_ARM, SPAN_ATTRIBUTE_CACHED, SPAN_OPTIMIZE, SPAN_REQUEST
from app.observability.tracing import phase
from app.query.optimizer import QueryOptimizer
from app.query.planner import SearchOptions, build_plan, validate_query_text
from app.retrieval.searcher import HybridSearcher
from app.search.cache import QueryCache
from app.search.knob_source import FlagContext
from app.search.rollout import assign_arm, overlap_at_k

if TYPE_CHECKING:
    from datetime import datetime

    from app.domain.models import QueryAnalysis, SearchPlan, SearchResult
    from app.domain.ports import DocumentStore, Embedder, LexicalIndex, VectorIndex
    from app.knobs import SearchKnobs
    from app.search.cache import QueryCacheKey
    from app.search.knob_source import KnobSource, ResolvedKnobs

logger = logging.getLogger("poimen.search")

SHADOW_OVERLAP_DEPTH = 10
ARM_BY_FLAGS = "flags"
ARM_BY_SERVICE = "service"
ARM_BY_REQUEST = "request"


@dataclass(frozen=True, slots=True)
class SearchCall:
    """One caller's search: the query, its options, and who is asking.

    `auth_scope` names what the caller may see (cache entries are shared only within one scope);
    `caller_key` keeps a caller on one rollout arm and is the flags' targeting key; `scopes` are the
    caller's granted scopes, for flag targeting. `as_of` is "now" for relative dates in the query
    ("last week"); None means the service's clock.
    """

    query: str
    options: SearchOptions
    auth_scope: str
    caller_key: str
    as_of: datetime | None = None
    scopes: tuple[str, ...] = ()

    @property
    def flag_context(self) -> FlagContext:
        """The evaluation context the flags are resolved with for this call."""
        return FlagContext(targeting_key=self.caller_key, project=self.options.project, scopes=self.scopes)


@dataclass(frozen=True, slots=True)
class SearchOutcome:
    """What one search produced: the optimizer's reading, the plan it ran, the result and how it was served.

    `arm` is the rollout arm (`control` when the request chose its strategy); `arm_decided_by` says what
    chose it: `flags` (the flag system's own split), `service` (bucketing by `hybrid_rollout_percent`)
    or `request`. `cached` is True when the result came from the query cache; `optimize_ms` and
    `total_ms` are then this request's own times.
    """

    analysis: QueryAnalysis
    plan: SearchPlan
    result: SearchResult
    arm: str
    cached: bool
    optimize_ms: float
    total_ms: float
    arm_decided_by: str = ARM_BY_SERVICE


class Generations(Protocol):
    """Where the cache reads a project's generation: the document store."""

    async def project_generation(self, project_id: str) -> int:
        """The project's generation now; it moves on with every write that changes its answers."""
        ...


class SearchService:
    """Runs searches; stateless apart from the cache and background shadow searches."""

    def __init__(
        self,
        *,
        searcher: HybridSearcher,
        optimizer: QueryOptimizer,
        knobs: KnobSource,
        cache: QueryCache[SearchOutcome],
        generations: Generations | None = None,
    ) -> None:
        self._searcher = searcher
        self._optimizer = optimizer
        self._knobs = knobs
        self._cache = cache
        self._generations = generations
        self._shadow_tasks: set[asyncio.Task[None]] = set()
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
    ) -> SearchService:
        """The service over these ports with the optimizer's own clock; no cache unless one is given.

        The store is the source of truth the lexical hits are checked against, and the cache's generations.
        """
        return cls(
            searcher=HybridSearcher(vector=vector, lexical=lexical, embedder=embedder, truth=store),
            optimizer=QueryOptimizer(),
            knobs=knobs,
            cache=cache if cache is not None else QueryCache(ttl_s=0, max_size=0),
            generations=store,
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
    def _plan(analysis: QueryAnalysis, options: SearchOptions, knobs: SearchKnobs, arm: str) -> SearchPlan:
        if arm == SEMANTIC_ARM:
            options = replace(options, strategy=SearchStrategy.SEMANTIC)
        return build_plan(analysis, options, knobs)

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

    async def _search(self, call: SearchCall) -> SearchOutcome:
        started = time.perf_counter()
        validate_query_text(call.query)
        resolved = self._apply_knobs(call)
        knobs = resolved.knobs
        arm, decided_by = self.rollout_arm(call, resolved)
        if arm != CONTROL_ARM:
            record_rollout_assignment(arm, decided_by=decided_by)
        current_arm.set(arm)  # engine errors of this search count under its arm
        with phase(SPAN_OPTIMIZE, **{SPAN_ATTRIBUTE_ARM: arm}):
            optimize_started = time.perf_counter()
            analysis = self._optimizer.analyze(call.query, now=call.as_of, classify=knobs.query_question_classification)
            plan = self._plan(analysis, call.options, knobs, arm)
            optimize_ms = (time.perf_counter() - optimize_started) * 1000
        key = await self._cache_key(call, analysis, plan, arm, resolved)
        cached = self._cache.get(key) if key is not None else None
        if cached is not None:
            cached = replace(cached, arm_decided_by=decided_by)
            return self._cached_outcome(cached, arm=arm, optimize_ms=optimize_ms, started=started)
        try:
            result = await self._searcher.search(plan)
        except AllEnginesFailedError as error:
            stage_ms = {STAGE_OPTIMIZE: optimize_ms, STAGE_TOTAL: (time.perf_counter() - started) * 1000}
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
        outcome = SearchOutcome(
            analysis=analysis,
            plan=plan,
            result=result,
            arm=arm,
            cached=False,
            optimize_ms=optimize_ms,
            total_ms=total_ms,
            arm_decided_by=decided_by,
        )
        record_search(
            strategy=plan.strategy.value,
            arm=arm,
            outcome="degraded" if result.degraded else "ok",
            stage_ms={**result.stage_ms, STAGE_OPTIMIZE: optimize_ms, STAGE_TOTAL: total_ms},
            degraded_reasons=result.degraded_reasons,
            result_count=len(result.hits),
        )
        if key is not None and not result.degraded:
            # A degraded answer is not what the caller would get once the engine is back: never reuse it.
            self._cache.put(key, outcome)
        if knobs.rollout_shadow_enabled and arm in {HYBRID_ARM, SEMANTIC_ARM}:
            self._start_shadow(call, analysis, knobs, arm, [hit.chunk_id for hit in result.hits])
        return outcome

    async def _cache_key(
        self, call: SearchCall, analysis: QueryAnalysis, plan: SearchPlan, arm: str, resolved: ResolvedKnobs
    ) -> QueryCacheKey | None:
        """The cache key under the project's generation, read from the store now; None: do not cache.

        Reading the generation per query is what lets no replica serve an answer from before a write
        acknowledged by another (one primary-key read). When the store cannot answer, the cache is
        skipped: an answer it holds might predate a write.
        """
        if not self._cache.enabled:
            return None
        generation = 0
        if self._generations is not None:
            try:
                generation = await self._generations.project_generation(plan.filters.project_id)
            except EngineError:
                return None
        return self._cache.make_key(
            query=analysis.normalized,
            plan=plan,
            generation=generation,
            knobs_version=resolved.version,
            knobs=resolved.identity,
            arm=arm,
            auth_scope=call.auth_scope,
        )

    @staticmethod
    def _cached_outcome(cached: SearchOutcome, *, arm: str, optimize_ms: float, started: float) -> SearchOutcome:
        # A hit is still an answered query: counted with only the stages it ran (optimize, total).
        total_ms = (time.perf_counter() - started) * 1000
        record_search(
            strategy=cached.plan.strategy.value,
            arm=arm,
            outcome="ok",
            stage_ms={STAGE_OPTIMIZE: optimize_ms, STAGE_TOTAL: total_ms},
            result_count=len(cached.result.hits),
        )
        span = trace.get_current_span()
        if span.is_recording():
            span.set_attribute(SPAN_ATTRIBUTE_CACHED, True)  # noqa: FBT003 - OTel's attribute API is positional
        return replace(cached, cached=True, total_ms=total_ms)

    def _start_shadow(
        self, call: SearchCall, analysis: QueryAnalysis, knobs: SearchKnobs, arm: str, served_ids: list[str]
    ) -> None:
        other_arm = SEMANTIC_ARM if arm == HYBRID_ARM else HYBRID_ARM
        plan = self._plan(analysis, call.options, knobs, other_arm)

        async def shadow() -> None:
            # Its own span, linked to the request by parentage; it may end after the request span.
            current_arm.set(other_arm)
            started = time.perf_counter()
            with phase("search.shadow", **{SPAN_ATTRIBUTE_ARM: other_arm}):
                try:
                    result = await self._searcher.search(plan)
                except AllEnginesFailedError:
                    return
                finally:
                    record_shadow_search(other_arm, time.perf_counter() - started)
            shadow_ids = [hit.chunk_id for hit in result.hits]
            record_shadow_overlap(overlap_at_k(served_ids, shadow_ids, k=SHADOW_OVERLAP_DEPTH))

        task = asyncio.get_running_loop().create_task(shadow())
        self._shadow_tasks.add(task)
        task.add_done_callback(self._shadow_tasks.discard)

    async def drain_shadow(self) -> None:
        """Wait for shadow searches still running (shutdown)."""
        if self._shadow_tasks:
            await asyncio.gather(*self._shadow_tasks, return_exceptions=True)
