"""Runs an evaluation: ingest through the real pipeline, search through the real query path, score.

Queries go through `SearchService`, the use case the HTTP API calls, with the cache off and every
caller on the hybrid arm; scores come from ir-measures. Engines are handed in (`EvaluationEngines`):
this layer never opens drivers.
"""

from __future__ import annotations

import logging
import statistics
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Final

from tqdm import tqdm

from app.domain.errors import AllEnginesFailedError, EngineError, InvalidQueryError
from app.domain.models import FusionMethod, SearchStrategy
from app.evaluation.datasets import project_id_for
from app.evaluation.metrics import (
    BEIR_METRICS,
    CONVERSATIONAL_EXTRA_METRICS,
    mean_scores,
    mean_scores_by,
    per_query_scores,
)
from app.query.planner import SearchOptions
from app.search.calls import SearchCall
from app.search.flags import knobs_from_settings
from app.search.knob_source import FixedKnobs
from app.search.service import SearchService

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence
    from datetime import datetime

    from app.config import Settings
    from app.evaluation.datasets import EvalDataset, EvalQuery
    from app.evaluation.ingest import EvaluationEngines
    from app.knobs import SearchKnobs

logger = logging.getLogger("poimen.evaluation")

SCORING_DEPTH: Final = 100
"""Hits kept per query: enough for Recall@100 (the planner's largest page)."""

ROUTED: Final = "routed"
STRATEGY_NAMES: Final = ("semantic", "lexical", "hybrid", "cascading", ROUTED)
FUSION_NAMES: Final = tuple(method.value for method in FusionMethod)
_FUSION_DEPENDENT: Final = frozenset({"hybrid", ROUTED})
"""Strategies whose ranking depends on the fusion method; the others run once."""


@dataclass(frozen=True, slots=True)
class RunSpec:
    """One configuration to evaluate. `strategy` None means routed by the optimizer; `fusion` None: default."""

    name: str
    strategy: SearchStrategy | None
    fusion: FusionMethod | None


@dataclass(frozen=True, slots=True)
class RunResult:
    """A scored run: mean metrics, per-category and per-conversation means, latency (ms), per-query scores.

    `rankings` is the run itself: query id -> document id -> score (`depth - rank + 1`), best first.
    `failed` names the queries the service refused or could not answer: each scored as a miss.
    """

    spec: RunSpec
    metrics: Mapping[str, float]
    by_category: Mapping[str, Mapping[str, float]]
    by_group: Mapping[str, Mapping[str, float]]
    latency_ms: Mapping[str, float]
    per_query: Mapping[str, Mapping[str, float]]
    rankings: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    failed: Mapping[str, str] = field(default_factory=dict)


_QUERY_FAILURES: Final = (InvalidQueryError, AllEnginesFailedError, EngineError)
"""What a query may meet that a user would see as a 4xx or 5xx: the run goes on, the query scores 0."""


def run_name(strategy: str, fusion: str | None) -> str:
    """`semantic`, `lexical`, `cascading`, or `<hybrid|routed>-<fusion>`."""
    return f"{strategy}-{fusion}" if strategy in _FUSION_DEPENDENT and fusion else strategy


def default_run_spec(settings: Settings) -> RunSpec:
    """The run made with the service's default configuration (strategy, routing flag, fusion)."""
    fusion = settings.ranking_algorithm
    if settings.query_optimization_enabled:
        return RunSpec(run_name(ROUTED, fusion.value), None, fusion)
    strategy = settings.search_strategy
    if strategy is not SearchStrategy.HYBRID:
        # A strategy that fuses nothing refuses a fusion option: every query of the run would score 0.
        return RunSpec(run_name(strategy.value, None), strategy, None)
    return RunSpec(run_name(strategy.value, fusion.value), strategy, fusion)


def run_specs(strategies: Sequence[str], fusions: Sequence[str], settings: Settings) -> list[RunSpec]:
    """The runs to make, single legs first; the default run is always included."""
    specs: dict[str, RunSpec] = {}
    for strategy in STRATEGY_NAMES:
        if strategy not in strategies:
            continue
        for fusion in fusions if strategy in _FUSION_DEPENDENT else (None,):
            method = FusionMethod(fusion) if fusion else None
            name = run_name(strategy, fusion)
            specs[name] = RunSpec(name, None if strategy == ROUTED else SearchStrategy(strategy), method)
    default = default_run_spec(settings)
    specs.setdefault(default.name, default)
    return list(specs.values())


def metric_names(dataset: EvalDataset) -> tuple[str, ...]:
    """BEIR's metrics, plus Recall@5/25/50 for conversational data sets."""
    return (*BEIR_METRICS, *CONVERSATIONAL_EXTRA_METRICS) if dataset.conversational else BEIR_METRICS


def document_ranking(query_id: str, document_ids: Iterable[str], *, depth: int = SCORING_DEPTH) -> dict[str, float]:
    """Ranked document ids as an ir-measures run row: first occurrence of each id kept, the query's own id dropped.

    Scores are `depth - rank + 1` (1-based rank), so the scorer sees exactly the searcher's order.
    """
    ranking: dict[str, float] = {}
    for document_id in document_ids:
        if document_id == query_id or document_id in ranking:
            continue
        ranking[document_id] = float(depth - len(ranking))
        if len(ranking) == depth:
            break
    return ranking


EVALUATION_CALLER: Final = "evaluation"


def evaluation_knobs(settings: Settings, spec: RunSpec) -> SearchKnobs:
    """The service's knobs for one run: routing on for a routed run, every caller on the hybrid arm, no cache.

    A run with an explicit strategy asks for it in the request, as a caller would.
    """
    knobs = knobs_from_settings(settings)
    update: dict[str, object] = {
        "hybrid_rollout_percent": 100.0,
        "rollout_shadow_enabled": False,
        "query_cache_ttl_secs": 0.0,
    }
    if spec.strategy is None:
        update["query_optimization_enabled"] = True
    return knobs.model_copy(update=update)


class QueryRunner:
    """Runs the judged queries of one data set through `SearchService`, one run spec at a time."""

    def __init__(
        self,
        dataset: EvalDataset,
        engines: EvaluationEngines,
        settings: Settings,
        *,
        clocks: Mapping[str, datetime] | None = None,
    ) -> None:
        self._dataset = dataset
        self._engines = engines
        self._settings = settings
        self._metric_names = metric_names(dataset)
        self._clocks = dict(clocks or {})
        self._services: dict[RunSpec, SearchService] = {}

    def service(self, spec: RunSpec) -> SearchService:
        """The search service a run uses: the server's use case with `evaluation_knobs`."""
        if spec not in self._services:
            engines = self._engines
            self._services[spec] = SearchService.over(
                vector=engines.vector,
                lexical=engines.lexical,
                embedder=engines.embedder,
                store=engines.store,
                knobs=FixedKnobs(evaluation_knobs(self._settings, spec)),
                second_stage=engines.second_stage,
            )
        return self._services[spec]

    async def search(self, query: EvalQuery, spec: RunSpec) -> tuple[list[str], float]:
        """The ranked document ids for one query (best chunk per document) and the end-to-end milliseconds.

        Relative dates in the query resolve against the project's clock (a conversation's last session).
        """
        project = project_id_for(self._dataset.name, query.group)
        started = time.perf_counter()
        options = SearchOptions(
            project=project,
            limit=SCORING_DEPTH,
            strategy=spec.strategy,
            fusion_method=spec.fusion,
            collapse=True,
            max_chunks_per_document=1,
        )
        call = SearchCall(
            query=query.text,
            options=options,
            auth_scope=EVALUATION_CALLER,
            caller_key=EVALUATION_CALLER,
            as_of=self._clocks.get(project),
        )
        outcome = await self.service(spec).search(call)
        elapsed_ms = (time.perf_counter() - started) * 1000
        return [hit.chunk.document_id for hit in outcome.result.hits], elapsed_ms

    async def run(self, spec: RunSpec, *, progress: bool = True) -> RunResult:
        """Search every judged query with `spec`, one at a time (so latencies are not contended), and score."""
        run: dict[str, dict[str, float]] = {}
        latencies: list[float] = []
        failed: dict[str, str] = {}
        queries = self._dataset.queries
        # None: a bar on a terminal only (not on a pipe or a CI log, where each redraw was one more line).
        for query in tqdm(queries, unit="q", desc=spec.name, disable=None if progress else True):
            try:
                document_ids, elapsed_ms = await self.search(query, spec)
            except _QUERY_FAILURES as error:
                # One refused query (too long, every engine down) must not cost the other queries' scores.
                failed[query.query_id] = f"{type(error).__name__}: {error}"
                logger.warning("%s: query %s scored as a miss: %s", spec.name, query.query_id, failed[query.query_id])
                run[query.query_id] = {}
                continue
            run[query.query_id] = document_ranking(query.query_id, document_ids)
            latencies.append(elapsed_ms)
        if failed:
            logger.warning("%s: %d of %d queries failed and count as misses", spec.name, len(failed), len(queries))
        return replace(score_run(self._dataset, spec, run, latencies, self._metric_names), failed=failed)


def score_run(
    dataset: EvalDataset,
    spec: RunSpec,
    run: Mapping[str, Mapping[str, float]],
    latencies_ms: Sequence[float],
    names: Sequence[str],
) -> RunResult:
    """Score a run against the data set's qrels: means overall and per question category."""
    per_query = per_query_scores(dataset.qrels, run, names)
    categories = {query.query_id: query.category for query in dataset.queries}
    groups = {query.query_id: query.group for query in dataset.queries}
    return RunResult(
        spec=spec,
        metrics=mean_scores(per_query),
        by_category=mean_scores_by(per_query, categories) if any(categories.values()) else {},
        by_group=mean_scores_by(per_query, groups) if any(groups.values()) else {},
        latency_ms=latency_summary(latencies_ms),
        per_query=per_query,
        rankings=run,
    )


def latency_summary(latencies_ms: Sequence[float]) -> dict[str, float]:
    """p50, p95 and mean in milliseconds (p95 by the inclusive method; zeros for no samples)."""
    if not latencies_ms:
        return {"p50": 0.0, "p95": 0.0, "mean": 0.0}
    ordered = sorted(latencies_ms)
    p95 = statistics.quantiles(ordered, n=20, method="inclusive")[-1] if len(ordered) > 1 else ordered[0]
    return {"p50": statistics.median(ordered), "p95": p95, "mean": statistics.fmean(ordered)}
