"""Domain values shared by every layer: documents, chunks, queries, plans and hits.

All of them are frozen: a value handed to a port or a fusion function is never changed by it.
Scores past the adapter boundary are similarities (higher is better); ranks start at 1.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from datetime import datetime

    from app.domain.reordering import EvidencePreferences, NeighbourSharing


class SearchStrategy(enum.StrEnum):
    """Which legs a query runs on, and how they combine."""

    HYBRID = "hybrid"
    SEMANTIC = "semantic"
    LEXICAL = "lexical"
    CASCADING = "cascading"


class FusionMethod(enum.StrEnum):
    """How two ranked lists become one."""

    RRF = "rrf"
    WEIGHTED = "weighted"
    ZSCORE = "zscore"


class QuestionType(enum.StrEnum):
    """The six question types of the reference optimizer."""

    FACTUAL = "factual"
    PROCEDURAL = "procedural"
    COMPARATIVE = "comparative"
    TROUBLESHOOTING = "troubleshooting"
    NAVIGATIONAL = "navigational"
    OPEN = "open"


SEMANTIC_LEG = "semantic"
LEXICAL_LEG = "lexical"


@dataclass(frozen=True, slots=True)
class Document:
    """A document as a client sent it. `text` is markdown or plain text.

    `context` is text that helps find the document without being part of it (e.g. the previous turn
    of a conversation): it is embedded with every chunk, never stored as chunk text or returned.
    """

    project_id: str
    document_id: str
    source: str
    title: str
    text: str
    tags: tuple[str, ...] = ()
    event_time: datetime | None = None
    metadata: Mapping[str, object] = field(default_factory=dict)
    context: str = ""


def titled_text(breadcrumb: Sequence[str], text: str) -> str:
    """A chunk's breadcrumb joined by " > ", a newline, then its text: what both legs search.

    The breadcrumb (the document title and section path) belongs to every chunk of a section, so a
    query naming the title finds a chunk that never repeats it. The vector leg embeds this string (plus
    any context) and the lexical leg indexes it as one content field: scored as one field, a title word
    counts like a body word, where separate title fields at the content's weight outranked the text
    (SciFact train lexical nDCG@10 0.673 with title fields vs 0.704 in one field; docs/evaluation.md).
    """
    crumbs = " > ".join(breadcrumb)
    return f"{crumbs}\n{text}" if crumbs else text


@dataclass(frozen=True, slots=True)
class ChunkDraft:
    """A chunk as the chunker cuts it, before it has an id or an embedding."""

    text: str
    breadcrumb: tuple[str, ...]
    section_title: str
    level: str
    position: int


@dataclass(frozen=True, slots=True)
class Chunk:
    """A retrievable unit of a document. `chunk_hash` is the SHA-256 of what gets embedded.

    `context` is the document's context (e.g. the previous turn of a conversation): appended to the
    embedded text and indexed lexically in a low-boost field, never returned as the chunk's text. The
    document store keeps it; vector hits may carry "" (the vector leg does not fetch it).
    """

    chunk_id: str
    document_id: str
    project_id: str
    text: str
    source: str
    level: str
    breadcrumb: tuple[str, ...]
    section_title: str
    position: int
    tags: tuple[str, ...] = ()
    event_time: datetime | None = None
    chunk_hash: str = ""
    context: str = ""


@dataclass(frozen=True, slots=True)
class EmbeddedChunk:
    """A chunk and its embedding, as the document store keeps them."""

    chunk: Chunk
    embedding: Sequence[float]
    embedding_model: str


@dataclass(frozen=True, slots=True)
class StoredDocument:
    """A document as the source of truth holds it, with its chunks in position order."""

    project_id: str
    document_id: str
    source: str
    title: str
    content_hash: str
    tags: tuple[str, ...]
    event_time: datetime | None
    metadata: Mapping[str, object]
    chunks: tuple[Chunk, ...]
    lexically_indexed: bool
    created_at: datetime
    updated_at: datetime
    version: int = 0
    """The store's version of this document: grows with every write (0 on a document not yet stored)."""


@dataclass(frozen=True, slots=True)
class OutboxStats:
    """The lexical outbox: documents waiting, and seconds the oldest has waited (0 when none).

    `newest_version`: the outbox version of the latest queued change (0 when none); a drain waits for the
    changes up to it (`DocumentStore.outbox_stats(through=...)`), not for those queued after it began.
    """

    backlog: int
    oldest_age_s: float
    newest_version: int = 0


@dataclass(frozen=True, slots=True)
class DocumentChunks:
    """The full current chunk set of one document; an empty set means the document is gone.

    `outbox_version` is the outbox entry this snapshot answers (set by `DocumentStore.claim_outbox`).
    """

    project_id: str
    document_id: str
    chunks: tuple[Chunk, ...]
    outbox_version: int | None = None


@dataclass(frozen=True, slots=True)
class Filters:
    """Restrictions every leg applies identically, so no leg returns what another would exclude.

    Tags: a chunk must carry every listed tag, case aside (`app.domain.tags`). Event time: `event_time_from` inclusive,
    `event_time_to` exclusive; a chunk without an event time matches a date range only when
    `include_undated` (set for a range read from the query's own words: "sepsis mortality from 2009 to
    2014" narrows dated chunks, it does not hide every undated one). `chunk_ids` limits a leg to those
    chunks (the cascading strategy's second stage). `excluded_terms`: a chunk whose own text (title,
    breadcrumb and text), source or tags holds one of them is left out, a term of several words as a
    phrase, read as each engine's English analyzer reads text (lowercase, stemmed: `-lag` also leaves out
    "lags"); the query's `-word` and `NOT word`, so the semantic leg cannot return what the query excluded.
    """

    project_id: str
    levels: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    source_prefix: str | None = None
    event_time_from: datetime | None = None
    event_time_to: datetime | None = None
    chunk_ids: tuple[str, ...] | None = None
    include_undated: bool = False
    excluded_terms: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class LexicalQuery:
    """What the lexical leg matches: free text, exact phrases, and terms that must not occur.

    With `weigh_repeats` (a passage) `text` keeps each word as often as the query says it, and a term
    weighs as many times as it occurs after analysis (BM25's query term frequency, as the OR of a
    paragraph's words scores it); otherwise every term of `text` weighs once.
    """

    text: str
    phrases: tuple[str, ...] = ()
    excluded_terms: tuple[str, ...] = ()
    fuzzy: bool = False
    weigh_repeats: bool = False


@dataclass(frozen=True, slots=True)
class ScoredHit:
    """One leg's hit. `score` is a similarity (higher is better); lists of hits are best first."""

    chunk: Chunk
    score: float

    @property
    def chunk_id(self) -> str:
        """The chunk's id, the key fusion works on."""
        return self.chunk.chunk_id


@dataclass(frozen=True, slots=True)
class QueryEntities:
    """What the optimizer found in a query."""

    years: tuple[int, ...] = ()
    months: tuple[int, ...] = ()
    phrases: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    mentions: tuple[str, ...] = ()
    numbers: tuple[str, ...] = ()
    relative_dates: tuple[str, ...] = ()
    expansions: Mapping[str, str] = field(default_factory=dict)
    excluded_terms: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class QueryAnalysis:
    """The optimizer's reading of a query and its routing decision, returned to the caller."""

    raw_query: str
    normalized: str
    tokens: tuple[str, ...]
    entities: QueryEntities
    has_special_syntax: bool
    has_date_filters: bool
    has_negation: bool
    token_count: int
    question_type: QuestionType
    strategy: SearchStrategy
    confidence: float
    search_text: str
    lexical_query: LexicalQuery
    event_time_from: datetime | None = None
    event_time_to: datetime | None = None
    # What the question is after (`app/query/intent.py`): a time, the latest state, the names it holds, and the
    # calendar or function words written as names (May, June, Will: names only where they are the project's speakers).
    asks_when: bool = False
    asks_latest: bool = False
    names: tuple[str, ...] = ()
    name_candidates: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class FusionSettings:
    """How to fuse: method, RRF constant, and per-leg weights (leg name -> weight; empty: unweighted RRF).

    No defaults here: the planner fills every field from the knobs (`app/knobs.py`).
    """

    method: FusionMethod
    rrf_k: int
    weights: Mapping[str, float]


@dataclass(frozen=True, slots=True)
class SearchPlan:
    """Everything the searcher needs to run one query; built by the planner from the knobs and the request.

    No defaults here: every field comes from the planner (`app/query/planner.py`), so nothing that builds
    a plan can silently get other defaults than the service. `max_chunks_per_document` None: no collapsing.
    """

    semantic_text: str
    lexical_query: LexicalQuery
    filters: Filters
    strategy: SearchStrategy
    strategy_confidence: float
    fusion: FusionSettings
    semantic_retrieve_k: int
    lexical_retrieve_k: int
    limit: int
    cascading_multiplier: int
    max_chunks_per_document: int | None
    min_score: float | None
    lexical_timeout_s: float
    semantic_timeout_s: float
    evidence: EvidencePreferences
    session_cap: int | None
    """At most this many hits of one session before the rest (`app/retrieval/diversity.py`); None: no cap."""
    neighbours: NeighbourSharing
    """What a hit gains from its neighbouring turns' scores (`app/retrieval/neighbours.py`)."""


@dataclass(frozen=True, slots=True)
class FusedHit:
    """A fused result: score, per-leg 1-based ranks, raw leg scores and per-leg contributions."""

    chunk: Chunk
    score: float
    ranks: Mapping[str, int]
    leg_scores: Mapping[str, float]
    contributions: Mapping[str, float]
    # `score` ranks within one query only (a z-score, an RRF sum); `relevance` is the readable one: in [0, 1],
    # comparable across queries, the lowest `relevance_mean` (the parts' weighted mean) of this hit and every
    # hit above it, so it never rises down the ranking (`app.retrieval.relevance`).
    relevance: float | None = None
    relevance_parts: Mapping[str, float] = field(default_factory=dict)
    relevance_mean: float | None = None
    rerank_score: float | None = None
    """The second stage's score (higher is better) when a reranker reordered this hit; `score` stays fusion's."""

    @property
    def readable_score(self) -> float:
        """`relevance` once calibrated, else the ranking `score`: what `final_score` and `min_score` mean."""
        return self.score if self.relevance is None else self.relevance

    @property
    def chunk_id(self) -> str:
        """The chunk's id."""
        return self.chunk.chunk_id


@dataclass(frozen=True, slots=True)
class RerankQuery:
    """What a reranker knows of the query: its text, quoted phrases, and the date range read from its words."""

    text: str
    phrases: tuple[str, ...] = ()
    event_time_from: datetime | None = None
    event_time_to: datetime | None = None
