"""Wire shapes (msgspec Structs) of the HTTP API and their mapping to and from domain values.

The search response follows the reference shape (query-optimization-engine.md Part 4) exactly, with a
few additions a caller needs: the rollout arm, whether it came from cache, and degradation reasons.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

import msgspec

from app.config import MAX_QUERY_CHARS, PROJECT_ID_PATTERN
from app.domain.models import (
    LEXICAL_LEG,
    SEMANTIC_LEG,
    Chunk,
    Document,
    FusedHit,
    QueryAnalysis,
    SearchStrategy,
    StoredDocument,
)

ProjectId = Annotated[str, msgspec.Meta(pattern=PROJECT_ID_PATTERN, description="[A-Za-z0-9._-]{1,64}")]
DocumentId = Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
StrategyName = Literal["hybrid", "semantic", "lexical", "cascading"]
FusionName = Literal["rrf", "weighted", "zscore"]

STRATEGY_LABELS = {
    SearchStrategy.HYBRID: "Hybrid",
    SearchStrategy.SEMANTIC: "Semantic",
    SearchStrategy.LEXICAL: "Lexical",
    SearchStrategy.CASCADING: "Cascading",
}


# ---------------------------------------------------------------------------------------------- ingestion


class DocumentIn(msgspec.Struct, kw_only=True, forbid_unknown_fields=False):
    """One document to ingest. `markdown` is accepted as a synonym of `text`."""

    id: DocumentId
    text: str | None = None
    markdown: str | None = None
    source: Annotated[str, msgspec.Meta(max_length=1024)] = ""
    title: Annotated[str, msgspec.Meta(max_length=1024)] = ""
    tags: Annotated[list[Annotated[str, msgspec.Meta(min_length=1, max_length=128)]], msgspec.Meta(max_length=64)] = []
    event_time: datetime | None = None
    metadata: dict[str, Any] = {}

    def body(self) -> str:
        """The document's text, whichever field carried it."""
        return self.text if self.text is not None else (self.markdown or "")

    def to_domain(self, project_id: str) -> Document:
        """The domain document; naive event times are taken as UTC."""
        event_time = self.event_time
        if event_time is not None and event_time.tzinfo is None:
            event_time = event_time.replace(tzinfo=UTC)
        return Document(
            project_id=project_id,
            document_id=self.id,
            source=self.source or self.id,
            title=self.title,
            text=self.body(),
            tags=tuple(dict.fromkeys(self.tags)),
            event_time=event_time,
            metadata=self.metadata,
        )


class DocumentBatchIn(msgspec.Struct, kw_only=True):
    """Several documents in one request; written atomically."""

    documents: Annotated[list[DocumentIn], msgspec.Meta(min_length=1)]


class IngestOutcomeOut(msgspec.Struct, kw_only=True):
    """What happened to one document."""

    id: str
    status: Literal["created", "updated", "unchanged"]
    chunks: int
    embedded: int


class IngestResponse(msgspec.Struct, kw_only=True):
    """The answer to an ingest: every document is committed to PostgreSQL when this is sent."""

    project: str
    documents: list[IngestOutcomeOut]


class ChunkOut(msgspec.Struct, kw_only=True):
    """A stored chunk."""

    id: str
    position: int
    text: str
    breadcrumb: list[str]
    section_title: str
    level: str
    tags: list[str]
    event_time: datetime | None
    chunk_hash: str


class DocumentOut(msgspec.Struct, kw_only=True):
    """A stored document with its chunks in order."""

    id: str
    project: str
    source: str
    title: str
    tags: list[str]
    event_time: datetime | None
    metadata: dict[str, Any]
    content_hash: str
    lexically_indexed: bool
    created_at: datetime
    updated_at: datetime
    chunks: list[ChunkOut]


def chunk_out(chunk: Chunk) -> ChunkOut:
    """Wire shape of a chunk."""
    return ChunkOut(
        id=chunk.chunk_id,
        position=chunk.position,
        text=chunk.text,
        breadcrumb=list(chunk.breadcrumb),
        section_title=chunk.section_title,
        level=chunk.level,
        tags=list(chunk.tags),
        event_time=chunk.event_time,
        chunk_hash=chunk.chunk_hash,
    )


def document_out(document: StoredDocument) -> DocumentOut:
    """Wire shape of a stored document."""
    return DocumentOut(
        id=document.document_id,
        project=document.project_id,
        source=document.source,
        title=document.title,
        tags=list(document.tags),
        event_time=document.event_time,
        metadata=dict(document.metadata),
        content_hash=document.content_hash,
        lexically_indexed=document.lexically_indexed,
        created_at=document.created_at,
        updated_at=document.updated_at,
        chunks=[chunk_out(chunk) for chunk in document.chunks],
    )


# ---------------------------------------------------------------------------------------------- search


class SearchFilters(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Restrictions applied identically on both legs."""

    level: str | list[str] | None = None
    tags: list[str] = []
    source_prefix: str | None = None
    date_from: datetime | None = None
    date_to: datetime | None = None


class FusionWeights(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Per-leg weights for fusion."""

    semantic: Annotated[float, msgspec.Meta(ge=0.0, le=10.0)] = 1.0
    lexical: Annotated[float, msgspec.Meta(ge=0.0, le=10.0)] = 1.0


class SearchRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Body of `POST /v1/search`."""

    query: Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_QUERY_CHARS)]
    project: ProjectId
    limit: Annotated[int, msgspec.Meta(ge=1, le=100)] | None = None
    filters: SearchFilters | None = None
    strategy: StrategyName | None = None
    fusion: FusionName | None = None
    weights: FusionWeights | None = None
    rrf_k: Annotated[int, msgspec.Meta(ge=1, le=10000)] | None = None
    collapse: Annotated[int, msgspec.Meta(ge=1, le=100)] | None = None
    min_score: float | None = None
    explain: bool = False


class RrfComponents(msgspec.Struct, kw_only=True):
    """Each leg's contribution to `final_score` (for RRF: weight / (k + rank))."""

    semantic_contribution: float
    lexical_contribution: float


class ScoreBreakdown(msgspec.Struct, kw_only=True):
    """Where a hit's score came from: 1-based ranks in each leg (null when that leg missed it)."""

    semantic_rank: int | None
    lexical_rank: int | None
    rrf_components: RrfComponents


class SearchHitOut(msgspec.Struct, kw_only=True):
    """One result, reference Part 4 shape plus document id, section title, tags and event time."""

    id: str
    rank: int
    final_score: float
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


class SearchMetricsOut(msgspec.Struct, kw_only=True):
    """Stage timings (milliseconds) and counts."""

    total_time_ms: float
    optimize_time_ms: float
    embed_time_ms: float
    semantic_time_ms: float
    lexical_time_ms: float
    fusion_time_ms: float
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
    event_time_from: datetime | None
    event_time_to: datetime | None


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
    cached: bool
    degraded: bool
    degraded_reasons: list[str]
    query_analysis: QueryAnalysisOut | None = None


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
        final_score=hit.score,
        semantic_score=hit.leg_scores.get(SEMANTIC_LEG),
        lexical_score=hit.leg_scores.get(LEXICAL_LEG),
        fusion_method=fusion_method,
        retrieval_engine=_retrieval_engine(hit, strategy),
        text=chunk.text,
        source=chunk.source,
        level=chunk.level,
        breadcrumb=list(chunk.breadcrumb),
        score_breakdown=ScoreBreakdown(
            semantic_rank=hit.ranks.get(SEMANTIC_LEG),
            lexical_rank=hit.ranks.get(LEXICAL_LEG),
            rrf_components=RrfComponents(
                semantic_contribution=hit.contributions.get(SEMANTIC_LEG, 0.0),
                lexical_contribution=hit.contributions.get(LEXICAL_LEG, 0.0),
            ),
        ),
        document_id=chunk.document_id,
        section_title=chunk.section_title,
        tags=list(chunk.tags),
        event_time=chunk.event_time,
    )


def analysis_out(analysis: QueryAnalysis) -> QueryAnalysisOut:
    """Wire shape of the optimizer's decision."""
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
        },
        event_time_from=analysis.event_time_from,
        event_time_to=analysis.event_time_to,
    )


class ProblemOut(msgspec.Struct, kw_only=True):
    """An RFC 9457 problem+json error body, as `app/api/errors.py` writes it.

    `field`/`fields` name the offending input of a 400; `reasons` lists why each engine failed on a 503.
    """

    type: str
    title: str
    status: int
    detail: str
    field: str | None = None
    fields: list[str] | None = None
    reasons: list[str] | None = None
    engine: str | None = None
