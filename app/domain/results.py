"""What a search answers: the fused hits, and how each leg went on the way. Pure data."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping

    from app.domain.models import FusedHit, FusionMethod, ScoredHit, SearchStrategy


@dataclass(frozen=True, slots=True)
class LegTiming:
    """How one leg went: milliseconds spent, hits returned, and an error name when it failed."""

    elapsed_ms: float
    result_count: int
    error: str | None = None


@dataclass(frozen=True, slots=True)
class LegHit:
    """One hit of one leg's own ranking, before fusion: the chunk's ids and the leg's raw score.

    Lean on purpose (no chunk text): results carry every leg's whole top-k and the query cache keeps them.
    """

    chunk_id: str
    document_id: str
    section_title: str
    score: float

    @classmethod
    def of(cls, hit: ScoredHit) -> LegHit:
        """The leg hit of a scored hit."""
        chunk = hit.chunk
        return cls(
            chunk_id=chunk.chunk_id, document_id=chunk.document_id, section_title=chunk.section_title, score=hit.score
        )


@dataclass(frozen=True, slots=True)
class SearchResult:
    """The searcher's answer: fused hits (best first) plus what happened on the way.

    `leg_hits` holds each leg that answered, under its leg name, with its own ranking as fusion received
    it: best first (rank = position + 1), raw scores (similarity for the semantic leg, BM25 for the
    lexical one). A leg that failed or did not run is absent; one that found nothing has an empty tuple.
    """

    hits: tuple[FusedHit, ...]
    strategy: SearchStrategy
    fusion_method: FusionMethod
    legs: Mapping[str, LegTiming]
    stage_ms: Mapping[str, float]
    degraded_reasons: tuple[str, ...] = ()
    leg_hits: Mapping[str, tuple[LegHit, ...]] = field(default_factory=dict)

    @property
    def degraded(self) -> bool:
        """True when a leg the plan asked for did not contribute."""
        return bool(self.degraded_reasons)
