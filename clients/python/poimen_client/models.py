"""Typed request and response bodies of the Poimen Memory Search API (msgspec Structs).

Request Structs omit unset fields on the wire, so the service applies its own defaults. Response Structs
name every field the service sends (a test checks each against the live OpenAPI document) and ignore
fields they do not know, so a newer service does not break an older client. Times are timezone-aware
`datetime`s; scores are similarities (higher is better) and ranks are 1-based.
"""

from __future__ import annotations

from datetime import datetime  # noqa: TC003 - msgspec resolves annotations at runtime
from typing import Any, Final, Literal

import msgspec

Strategy = Literal["hybrid", "semantic", "lexical", "cascading"]
Fusion = Literal["rrf", "weighted", "zscore"]


# Requests


class SearchFilters(msgspec.Struct, kw_only=True, frozen=True, omit_defaults=True):
    """Restrictions applied identically to both legs; `date_from`/`date_to` drop undated chunks."""

    level: str | list[str] | None = None
    tags: list[str] = []
    source_prefix: str | None = None
    date_from: datetime | None = None
    date_to: datetime | None = None


class FusionWeights(msgspec.Struct, kw_only=True, frozen=True, omit_defaults=True):
    """Per-leg fusion weights, 0-10 each; one alone (0-1): the other leg gets 1 - it; none: the service's."""

    semantic: float | None = None
    lexical: float | None = None


class SearchQuery(msgspec.Struct, kw_only=True, frozen=True, omit_defaults=True):
    """One search: the body of `POST /v1/search` less `project`, and one query of a batch.

    Paging: `offset=0` asks for the first page; pass the answer's `next_cursor` as `cursor` for the next.
    """

    query: str
    limit: int | None = None
    filters: SearchFilters | None = None
    strategy: Strategy | None = None
    fusion: Fusion | None = None
    weights: FusionWeights | None = None
    rrf_k: int | None = None
    collapse: int | None = None
    """At most this many chunks per document."""
    min_score: float | None = None
    explain: bool = False
    offset: int | None = None
    cursor: str | None = None
    as_of: datetime | None = None
    """"Now" for relative dates in the query ("last week"): the memory's own clock; None: the server's. No zone: UTC."""


class Document(msgspec.Struct, kw_only=True, frozen=True, omit_defaults=True):
    """One document to ingest: markdown or plain text, chunked by the service.

    `context` helps find the document without being part of it (a conversation's previous turn).
    `expected_version` writes only if the stored document is at that version (0: only if it is new).
    """

    id: str
    text: str
    source: str = ""
    title: str = ""
    tags: list[str] = []
    event_time: datetime | None = None
    metadata: dict[str, Any] = {}
    context: str = ""
    expected_version: int | None = None


class DocumentFilter(msgspec.Struct, kw_only=True, frozen=True, omit_defaults=True):
    """Which documents a listing or a delete by filter selects: all the given conditions."""

    source_prefix: str | None = None
    tag: str | None = None
    event_time_from: datetime | None = None
    event_time_to: datetime | None = None
    updated_since: datetime | None = None


# Search responses


class RrfComponents(msgspec.Struct, kw_only=True, frozen=True):
    """Each leg's contribution to the fused score (the reference's name; the same as `fusion`'s)."""

    semantic_contribution: float
    lexical_contribution: float


class FusionBreakdown(msgspec.Struct, kw_only=True, frozen=True):
    """The fused score that ordered the hits, named after the method that made it, and each leg's part of it.

    `boosts`: the rest of `score` by name (`entity`, `mention`, `date`, `recency`, `neighbours`).
    """

    method: str
    score: float
    semantic_contribution: float
    lexical_contribution: float
    boosts: dict[str, float] = {}


class RelevanceBreakdown(msgspec.Struct, kw_only=True, frozen=True):
    """Each leg's readable relevance in [0, 1] (None: the leg did not run) and `mean`, their weighted mean.

    `final_score` is the lowest `mean` of the hit and every hit ranked above it, so it never rises down the list.
    `mean` is None from a service that does not send it.
    """

    semantic: float | None
    lexical: float | None
    mean: float | None = None


class ScoreBreakdown(msgspec.Struct, kw_only=True, frozen=True):
    """1-based ranks of a hit in each leg (None when that leg missed it), the fused score and the relevance."""

    semantic_rank: int | None
    lexical_rank: int | None
    rrf_components: RrfComponents
    fusion: FusionBreakdown
    relevance: RelevanceBreakdown


class SearchHit(msgspec.Struct, kw_only=True, frozen=True):
    """One ranked chunk."""

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
    rerank_score: float | None = None  # set when the server's second stage (RERANKER) ordered this hit


class SearchMetrics(msgspec.Struct, kw_only=True, frozen=True):
    """Stage timings in milliseconds, and counts."""

    total_time_ms: float
    optimize_time_ms: float
    embed_time_ms: float
    semantic_time_ms: float
    lexical_time_ms: float
    fusion_time_ms: float
    rerank_time_ms: float = 0.0
    semantic_results_count: int
    lexical_results_count: int
    final_results_count: int


class QueryAnalysis(msgspec.Struct, kw_only=True, frozen=True):
    """The optimizer's reading of the query (`explain=True`)."""

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
    event_time_from: datetime | None  # the range the query's own words describe
    event_time_to: datetime | None
    applied_event_time_from: datetime | None = None  # the range the search applied (with the filters' dates)
    applied_event_time_to: datetime | None = None
    undated_included: bool = False
    unused_options: list[str] = []  # what the request sent that routing left unused (`fusion`, `rrf_k`, ...)


class LegHit(msgspec.Struct, kw_only=True, frozen=True):
    """One chunk of a leg's own ranking, before fusion."""

    id: str
    rank: int
    score: float
    document_id: str
    section_title: str


class LegRankings(msgspec.Struct, kw_only=True, frozen=True):
    """Each leg's own ranking (`explain`); None for a leg that did not run."""

    semantic: list[LegHit] | None
    lexical: list[LegHit] | None


class SearchResponse(msgspec.Struct, kw_only=True, frozen=True):
    """The answer of a search; `next_cursor` is set on a paged search while the ranking has more hits."""

    query: str
    project: str
    search_strategy: str
    strategy_confidence: float
    results: list[SearchHit]
    metrics: SearchMetrics
    fusion_method: str
    question_type: str
    rollout_arm: str
    rollout_decided_by: str
    cached: bool
    degraded: bool
    degraded_reasons: list[str]
    query_analysis: QueryAnalysis | None = None
    leg_rankings: LegRankings | None = None
    offset: int = 0
    next_cursor: str | None = None
    ranking_changed: bool = False  # a later page cut from a new ranking: hits may repeat or be missed across pages


class BatchSearchResponse(msgspec.Struct, kw_only=True, frozen=True):
    """One search response per query, in the order asked."""

    results: list[SearchResponse]


# Document responses


INGEST_STATUSES: Final = frozenset({"created", "updated", "unchanged"})
"""The outcome statuses this client knows; `IngestOutcome.status` keeps any other a newer service sends."""


class IngestOutcome(msgspec.Struct, kw_only=True, frozen=True):
    """What an ingest did to one document; `version` is the stored version after it.

    `status` is one of `INGEST_STATUSES`, or one a newer service added: the document was written all the same
    (a status the client did not list failed the whole answer, for a write that was done).
    """

    id: str
    status: str
    chunks: int
    embedded: int
    version: int


class IngestResponse(msgspec.Struct, kw_only=True, frozen=True):
    """The answer to an ingest: PostgreSQL holds every document when it arrives."""

    project: str
    documents: list[IngestOutcome]


class StoredChunk(msgspec.Struct, kw_only=True, frozen=True):
    """A chunk as stored."""

    id: str
    position: int
    text: str
    breadcrumb: list[str]
    section_title: str
    level: str
    tags: list[str]
    event_time: datetime | None
    chunk_hash: str


class StoredDocument(msgspec.Struct, kw_only=True, frozen=True):
    """A stored document with its chunks in order."""

    id: str
    project: str
    source: str
    title: str
    tags: list[str]
    event_time: datetime | None
    metadata: dict[str, Any]
    context: str
    content_hash: str
    lexically_indexed: bool
    created_at: datetime
    updated_at: datetime
    version: int
    chunks: list[StoredChunk]


class DocumentSummary(msgspec.Struct, kw_only=True, frozen=True):
    """A listed document: no text and no chunks (`get_document` has them)."""

    id: str
    title: str
    source: str
    tags: list[str]
    event_time: datetime | None
    chunks: int
    version: int
    lexically_indexed: bool
    created_at: datetime
    updated_at: datetime


class DocumentPage(msgspec.Struct, kw_only=True, frozen=True):
    """One page of a listing, by id; pass `next_cursor` back for the next page (None: the last)."""

    project: str
    items: list[DocumentSummary]
    next_cursor: str | None


# Project and operator responses


class ProjectSummary(msgspec.Struct, kw_only=True, frozen=True):
    """A project in the listing."""

    project: str


class ProjectPage(msgspec.Struct, kw_only=True, frozen=True):
    """One page of the projects the caller may read that hold documents, by id; `next_cursor` None at the end."""

    items: list[ProjectSummary]
    next_cursor: str | None


class ProjectStats(msgspec.Struct, kw_only=True, frozen=True):
    """A project's size and lexical backlog; an unknown project answers zeros."""

    project: str
    documents: int
    chunks: int
    lexically_indexed: int
    pending: int
    oldest_pending_age_s: float
    last_write_at: datetime | None


class Deleted(msgspec.Struct, kw_only=True, frozen=True):
    """How many documents a delete removed."""

    project: str
    deleted: int


class Reindexed(msgspec.Struct, kw_only=True, frozen=True):
    """How many documents a lexical rebuild queued."""

    project: str
    queued_documents: int


class Liveness(msgspec.Struct, kw_only=True, frozen=True):
    """`GET /healthz`: the process answers."""

    status: str


class Readiness(msgspec.Struct, kw_only=True, frozen=True):
    """`GET /readyz`: the service's readiness and each engine's state (`checks`).

    `status` is "ready" when every engine answered, "degraded" (still 200) while one search leg's engine
    is down, "not ready" (503) when none could answer.
    """

    status: str
    checks: dict[str, str]
    details: dict[str, str] = {}
    checked_at: datetime | None = None


class Problem(msgspec.Struct, kw_only=True, frozen=True):
    """An RFC 9457 problem+json error body as the service writes it."""

    title: str = ""
    status: int | None = None
    detail: str = ""
    type: str = "about:blank"
    field: str | None = None
    fields: list[str] | None = None
    reasons: list[str] | None = None
    engine: str | None = None
    document_id: str | None = None
    current_version: int | None = None
    refused_status: int | None = None
    """On a 429: the token was refused (401 or 403) and the client address is past its refused authentications."""
