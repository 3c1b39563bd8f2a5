"""Response shapes (msgspec Structs) of the search endpoints, and the search outcome -> response mapping.

Requests are in `app.api.search_requests`.

The search response follows the reference shape (query-optimization-engine.md Part 4) exactly, with a
few additions a caller needs: the rollout arm, whether it came from cache, and degradation reasons.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Final

import msgspec

from app.api.score_breakdown import ScoreBreakdown, score_breakdown_out
from app.domain.labels import STAGE_EMBED, STAGE_FUSION, STAGE_LEXICAL, STAGE_RERANK, STAGE_SEMANTIC
from app.domain.models import LEXICAL_LEG, SEMANTIC_LEG, Filters, FusedHit, QueryAnalysis, SearchStrategy

if TYPE_CHECKING:
    from collections.abc import Sequence

    from app.domain.results import LegHit, SearchResult
    from app.search.calls import SearchOutcome

STRATEGY_LABELS = {
    SearchStrategy.HYBRID: "Hybrid",
    SearchStrategy.SEMANTIC: "Semantic",
    SearchStrategy.LEXICAL: "Lexical",
    SearchStrategy.CASCADING: "Cascading",
}

UNUSED_OPTIONS_DESCRIPTION: Final = (
    "Options the request sent that this search did not use, as the request spells them (`fusion`,"
    " `weights.semantic`, `weights.lexical`, `rrf_k`): no strategy was asked for, and routing or the rollout's"
    " semantic arm chose one that fuses nothing; or `rrf_k` without a `fusion`, when the service's fusion"
    " (RANKING_ALGORITHM) is not rrf. A strategy or fusion the request names that cannot use them refuses them"
    " instead (400)"
)
LEG_RANKINGS_DESCRIPTION: Final = (
    "With `explain`: each leg's own ranked candidates before fusion, the whole top-k it returned"
    " (`semantic_retrieve_k` / `lexical_retrieve_k`, 50 by default; a cascading search's lexical leg that times"
    " CASCADING_LEXICAL_MULTIPLIER), whatever page is asked. When `collapse` left the page short and the search"
    " ran again deeper, they are the deeper search's: up to 1,000 hits per leg (or the first search's top-k, if more)"
)


class SearchHitOut(msgspec.Struct, kw_only=True):
    """One result, reference Part 4 shape plus document id, section title, tags and event time."""

    id: str
    rank: int
    final_score: float  # readable relevance in [0, 1] (see RelevanceBreakdown); the fusion's own is in `fusion`
    semantic_score: float | None
    lexical_score: float | None
    fusion_method: str
    retrieval_engine: str
    text: str
    source: str
    level: str
    breadcrumb: list[str]
    score_breakdown: ScoreBreakdown
    document_id: str
    section_title: str
    tags: list[str]
    event_time: datetime | None
    # The second stage's score when a reranker ordered this hit (`RERANKER`); the order is by it, not final_score.
    rerank_score: float | None = None


class SearchMetricsOut(msgspec.Struct, kw_only=True):
    """This request's stage timings (milliseconds) and the answer's counts.

    A cached answer ran no stage but the optimizer: its embed, semantic, lexical, fusion and rerank times
    are 0 (they were the first request's), while the counts describe the answer as it was computed.
    """

    total_time_ms: float
    optimize_time_ms: float
    embed_time_ms: float
    semantic_time_ms: float
    lexical_time_ms: float
    fusion_time_ms: float
    rerank_time_ms: float = 0.0  # the second stage (`RERANKER`); 0 when none ran
    semantic_results_count: int
    lexical_results_count: int
    final_results_count: int


class QueryAnalysisOut(msgspec.Struct, kw_only=True):
    """The optimizer's decision, returned so callers can see why a strategy was chosen."""

    normalized: str
    tokens: list[str]
    question_type: str
    routed_strategy: str
    confidence: float
    has_special_syntax: bool
    has_date_filters: bool
    has_negation: bool
    token_count: int
    entities: dict[str, Any]
    # The range the query's own words describe ("last week", "in March", "2023").
    event_time_from: datetime | None
    event_time_to: datetime | None
    # The range the search applied: that one intersected with the filters' dates, or the filters' alone
    # when the two do not overlap; `undated_included`: chunks without an event time were kept (a range read
    # from the query's words narrows dated chunks, it does not hide undated ones).
    applied_event_time_from: datetime | None = None
    applied_event_time_to: datetime | None = None
    undated_included: bool = False
    unused_options: Annotated[list[str], msgspec.Meta(description=UNUSED_OPTIONS_DESCRIPTION)] = []


class LegHitOut(msgspec.Struct, kw_only=True):
    """One hit of one leg's own ranking: its 1-based rank there and the leg's raw score."""

    id: str
    rank: int
    score: float
    document_id: str
    section_title: str


class LegRankingsOut(msgspec.Struct, kw_only=True):
    """Each leg's own ranked top-k before fusion (null: the leg did not run or failed; []: it found nothing).

    Raw scores: cosine similarity for `semantic`, BM25 for `lexical`. Always the whole top-k the leg
    returned (`semantic_retrieve_k` / `lexical_retrieve_k`), whatever page of the fused ranking is asked; a
    search that collapsing sent deeper (`app/retrieval/widening.py`) shows the deeper one's, up to 1,000 a leg.
    """

    semantic: list[LegHitOut] | None
    lexical: list[LegHitOut] | None


class SearchResponse(msgspec.Struct, kw_only=True):
    """Answer of `GET /memory/query` and `POST /v1/search`."""

    query: str
    project: str
    search_strategy: str
    strategy_confidence: float
    results: list[SearchHitOut]
    metrics: SearchMetricsOut
    fusion_method: str
    question_type: str
    rollout_arm: str
    # What chose the arm: `flags` (the flag system's split), `service` (HYBRID_ROLLOUT_PERCENT bucketing), `request`.
    rollout_decided_by: str
    cached: bool
    degraded: bool
    degraded_reasons: list[str]
    query_analysis: QueryAnalysisOut | None = None
    leg_rankings: Annotated[LegRankingsOut | None, msgspec.Meta(description=LEG_RANKINGS_DESCRIPTION)] = None
    """With `explain`: what each leg found on its own, so a caller sees what one leg found and the other missed."""
    offset: int = 0
    next_cursor: str | None = None
    """Present on a paged search (`offset` or `cursor` sent) while the ranking has more hits."""
    ranking_changed: bool = False
    """A later page cut from a ranking made now, not from the one its first page came from: the project was
    written to since, and this replica does not hold that ranking (another replica made it, or it expired
    from the cache), or the ranking's earlier hits are not those the cursor's pages were cut from. Hits may
    then repeat or be missed across pages; search again from the first page to be sure of every hit."""


class BatchSearchResponse(msgspec.Struct, kw_only=True):
    """Answer of `POST /v1/search/batch`: one search response per query, in the order asked."""

    results: list[SearchResponse]


def _retrieval_engine(hit: FusedHit, strategy: SearchStrategy) -> str:
    if strategy is SearchStrategy.CASCADING:
        return STRATEGY_LABELS[strategy]
    legs = set(hit.ranks)
    if legs >= {SEMANTIC_LEG, LEXICAL_LEG}:
        return "Hybrid"
    return "Semantic" if SEMANTIC_LEG in legs else "Lexical"


def hit_out(hit: FusedHit, *, rank: int, fusion_method: str, strategy: SearchStrategy) -> SearchHitOut:
    """Wire shape of one fused hit at its 1-based rank."""
    chunk = hit.chunk
    return SearchHitOut(
        id=chunk.chunk_id,
        rank=rank,
        final_score=hit.readable_score,
        semantic_score=hit.leg_scores.get(SEMANTIC_LEG),
        lexical_score=hit.leg_scores.get(LEXICAL_LEG),
        fusion_method=fusion_method,
        retrieval_engine=_retrieval_engine(hit, strategy),
        text=chunk.text,
        source=chunk.source,
        level=chunk.level,
        breadcrumb=list(chunk.breadcrumb),
        score_breakdown=score_breakdown_out(hit, fusion_method=fusion_method),
        document_id=chunk.document_id,
        section_title=chunk.section_title,
        tags=list(chunk.tags),
        event_time=chunk.event_time,
        rerank_score=hit.rerank_score,
    )


def _leg_out(hits: Sequence[LegHit] | None) -> list[LegHitOut] | None:
    if hits is None:
        return None
    return [
        LegHitOut(
            id=hit.chunk_id, rank=rank, score=hit.score, document_id=hit.document_id, section_title=hit.section_title
        )
        for rank, hit in enumerate(hits, start=1)
    ]


def leg_rankings_out(result: SearchResult) -> LegRankingsOut:
    """Wire shape of each leg's own ranking."""
    return LegRankingsOut(
        semantic=_leg_out(result.leg_hits.get(SEMANTIC_LEG)), lexical=_leg_out(result.leg_hits.get(LEXICAL_LEG))
    )


def analysis_out(analysis: QueryAnalysis, filters: Filters, *, unused_options: Sequence[str] = ()) -> QueryAnalysisOut:
    """Wire shape of the optimizer's decision, with the event-time range the search applied (`filters`).

    `unused_options`: what the request sent that the search did not use, as the request spells it.
    """
    entities = analysis.entities
    return QueryAnalysisOut(
        normalized=analysis.normalized,
        tokens=list(analysis.tokens),
        question_type=analysis.question_type.value,
        routed_strategy=STRATEGY_LABELS[analysis.strategy],
        confidence=analysis.confidence,
        has_special_syntax=analysis.has_special_syntax,
        has_date_filters=analysis.has_date_filters,
        has_negation=analysis.has_negation,
        token_count=analysis.token_count,
        entities={
            "years": list(entities.years),
            "months": list(entities.months),
            "phrases": list(entities.phrases),
            "tags": list(entities.tags),
            "mentions": list(entities.mentions),
            "numbers": list(entities.numbers),
            "relative_dates": list(entities.relative_dates),
            "expansions": dict(entities.expansions),
            "excluded_terms": list(entities.excluded_terms),
            # Names the evidence boosts match (capitalised words, QUERY_VOCABULARY_PATH entities, the project's
            # speakers named like a month or a modal word: "What did May say?"), lowercase.
            "names": list(analysis.names),
        },
        event_time_from=analysis.event_time_from,
        event_time_to=analysis.event_time_to,
        applied_event_time_from=filters.event_time_from,
        applied_event_time_to=filters.event_time_to,
        undated_included=filters.include_undated,
        unused_options=list(unused_options),
    )


def search_response(
    query: str,
    outcome: SearchOutcome,
    *,
    explain: bool,
    next_cursor: str | None = None,
    unused_options: Sequence[str] = (),
) -> SearchResponse:
    """The wire shape of one search outcome; `query` is the caller's text as sent; ranks go on from its offset.

    `unused_options`: the options the request sent that the search did not use, shown with `explain`.
    """
    result, plan = outcome.result, outcome.plan
    # Only the hybrid strategy fuses; the others rank by one leg's own score (cascading: vector similarity).
    fusion_method = {
        SearchStrategy.HYBRID: result.fusion_method.value,
        SearchStrategy.CASCADING: "cascading",
    }.get(result.strategy, "none")
    semantic = result.legs.get(SEMANTIC_LEG)
    lexical = result.legs.get(LEXICAL_LEG)
    # The first request's stage times are not this one's: a cache hit that read "embed 6.4 ms" in a total of
    # 1.4 ms made no sense.
    stage = {} if outcome.cached else result.stage_ms
    return SearchResponse(
        query=query,
        project=plan.filters.project_id,
        search_strategy=STRATEGY_LABELS[result.strategy],
        strategy_confidence=plan.strategy_confidence,
        results=[
            hit_out(hit, rank=rank, fusion_method=fusion_method, strategy=result.strategy)
            for rank, hit in enumerate(result.hits, start=outcome.offset + 1)
        ],
        metrics=SearchMetricsOut(
            total_time_ms=round(outcome.total_ms, 3),
            optimize_time_ms=round(outcome.optimize_ms, 3),
            embed_time_ms=round(stage.get(STAGE_EMBED, 0.0), 3),
            semantic_time_ms=round(stage.get(STAGE_SEMANTIC, 0.0), 3),
            lexical_time_ms=round(stage.get(STAGE_LEXICAL, 0.0), 3),
            fusion_time_ms=round(stage.get(STAGE_FUSION, 0.0), 3),
            rerank_time_ms=round(stage.get(STAGE_RERANK, 0.0), 3),
            semantic_results_count=semantic.result_count if semantic else 0,
            lexical_results_count=lexical.result_count if lexical else 0,
            final_results_count=len(result.hits),
        ),
        fusion_method=fusion_method,
        question_type=outcome.analysis.question_type.value,
        rollout_arm=outcome.arm,
        rollout_decided_by=outcome.arm_decided_by,
        cached=outcome.cached,
        degraded=result.degraded,
        degraded_reasons=list(result.degraded_reasons),
        query_analysis=analysis_out(outcome.analysis, plan.filters, unused_options=unused_options) if explain else None,
        leg_rankings=leg_rankings_out(result) if explain else None,
        offset=outcome.offset,
        next_cursor=next_cursor,
        ranking_changed=outcome.ranking_changed,
    )


def response_json(response: SearchResponse | list[SearchResponse]) -> str:
    """A search response (or several) as the JSON the HTTP API sends (for `poimen query --json`)."""
    return msgspec.json.encode(response).decode()
