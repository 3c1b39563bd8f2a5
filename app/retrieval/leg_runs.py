"""How a search runs each leg against its port: timed, traced, degraded on failure, recorded on the run.

`LegRunner` holds the ports and runs one leg's call at a time for the searcher's strategies: embedding the
query, the vector search (optionally confirming the lexical hits in the same read, `ConfirmingVectorIndex`),
and the lexical search (optionally confirmed against the source of truth, `drop_stale`). Each call records
its stage time, its `LegTiming` and its ranking on the `SearchRun`, and names a failure as a reason
instead of raising (`attempt`), so the strategy decides what a missing leg means.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Final

from app.domain.labels import LEXICAL_UNCONFIRMED, STAGE_EMBED, STAGE_LEXICAL, STAGE_SEMANTIC
from app.domain.models import LEXICAL_LEG, SEMANTIC_LEG, ScoredHit
from app.domain.ports import ConfirmingVectorIndex
from app.domain.results import LegHit, LegTiming
from app.observability.tracing import phase
from app.retrieval.legs import attempt, deadline_at, drop_stale, note_failure

if TYPE_CHECKING:
    from collections.abc import Sequence

    from app.domain.models import Filters, SearchPlan
    from app.domain.ports import ChunkTruth, Embedder, LexicalIndex, VectorIndex

EMBEDDER_STAGE: Final = "embedder"
SPAN_EMBED: Final = "search.embed"
SPAN_ENGINE_PREFIX: Final = "search.engine."


def elapsed_ms(started: float) -> float:
    """Milliseconds since `started` (a `time.perf_counter()` reading)."""
    return (time.perf_counter() - started) * 1000


@dataclass(slots=True)
class SearchRun:
    """What one search records on the way: stage times, per-leg timings and degradation reasons."""

    stage_ms: dict[str, float] = field(default_factory=dict)
    legs: dict[str, LegTiming] = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)
    semantic_ms: float = 0.0  # embed + vector search, the semantic leg's own time
    semantic_error: str | None = None
    leg_hits: dict[str, tuple[LegHit, ...]] = field(default_factory=dict)  # each answering leg's own ranking
    query_embedding: Sequence[float] | None = None  # embedded ahead (a batch): the embed stage is skipped
    # The query's embedding once this search has it: a deeper search for a collapsed page reuses it.
    embedding: Sequence[float] | None = None
    confirmed_chunks: dict[str, str] | None = None  # chunk id -> hash, read with the vector search


class LegRunner:
    """Runs the legs of a search against the ports. Stateless: one instance serves concurrent searches."""

    def __init__(
        self, *, vector: VectorIndex, lexical: LexicalIndex, embedder: Embedder, truth: ChunkTruth | None
    ) -> None:
        self._truth = truth
        self._vector = vector
        # Decided once: a runtime Protocol check reads every member, too slow for every search.
        self._confirming = vector if truth is not None and isinstance(vector, ConfirmingVectorIndex) else None
        self._lexical = lexical
        self._embedder = embedder

    @property
    def confirms_in_one_read(self) -> bool:
        """Whether the vector search can confirm the lexical hits in its own read of the truth."""
        return self._confirming is not None

    async def semantic(
        self, plan: SearchPlan, run: SearchRun, *, top_k: int, filters: Filters
    ) -> list[ScoredHit] | None:
        """Embed, then search vectors, both within one `semantic_timeout_s` deadline."""
        deadline = asyncio.get_running_loop().time() + plan.semantic_timeout_s
        embedding = await self.embed(plan, run, deadline=deadline)
        if embedding is None:
            self.record_semantic(run, hits=None)
            return None
        return await self.vector_search(plan, run, embedding, top_k=top_k, filters=filters, deadline=deadline)

    async def embed(self, plan: SearchPlan, run: SearchRun, *, deadline: float | None = None) -> list[float] | None:
        """The query's embedding (None when the embedder failed or ran out of time: the reason is recorded)."""
        if run.query_embedding is not None:
            run.stage_ms[STAGE_EMBED] = 0.0
            run.embedding = run.query_embedding
            return list(run.query_embedding)
        started = time.perf_counter()
        with phase(SPAN_EMBED) as span:
            embedding, reason = await attempt(
                self._embedder.embed_query(plan.semantic_text, scope=plan.filters.project_id),
                stage=EMBEDDER_STAGE,
                deadline=deadline_at(deadline, plan.semantic_timeout_s),
            )
            note_failure(span, EMBEDDER_STAGE, reason)
        run.stage_ms[STAGE_EMBED] = elapsed_ms(started)
        run.semantic_ms += run.stage_ms[STAGE_EMBED]
        if reason is not None:
            run.reasons.append(reason)
            run.semantic_error = reason
        run.embedding = embedding
        return embedding

    async def vector_search(  # noqa: PLR0913 - the plan's pieces a vector search needs
        self,
        plan: SearchPlan,
        run: SearchRun,
        embedding: Sequence[float],
        *,
        top_k: int,
        filters: Filters,
        deadline: float | None = None,
        confirm: Sequence[str] | None = None,
    ) -> list[ScoredHit] | None:
        """Search vectors; with `confirm`, also read which of those chunks exist into `run.confirmed_chunks`.

        `confirm` is honoured by a `ConfirmingVectorIndex` only; `run.confirmed_chunks` stays None when the read fails.
        """
        started = time.perf_counter()
        with phase(SPAN_ENGINE_PREFIX + self._vector.name) as span:
            hits, reason = await attempt(
                self._read_vectors(embedding, top_k=top_k, filters=filters, confirm=confirm, run=run),
                stage=STAGE_SEMANTIC,
                deadline=deadline_at(deadline, plan.semantic_timeout_s),
            )
            note_failure(span, self._vector.name, reason, result_count=len(hits or ()))
        run.stage_ms[STAGE_SEMANTIC] = elapsed_ms(started)
        run.semantic_ms += run.stage_ms[STAGE_SEMANTIC]
        if reason is not None:
            run.reasons.append(reason)
            run.semantic_error = reason
        else:
            run.leg_hits[SEMANTIC_LEG] = _leg_hits(hits)
        self.record_semantic(run, hits=hits)
        return hits

    async def _read_vectors(
        self,
        embedding: Sequence[float],
        *,
        top_k: int,
        filters: Filters,
        confirm: Sequence[str] | None,
        run: SearchRun,
    ) -> list[ScoredHit]:
        if confirm is None or self._confirming is None:
            return await self._vector.search(embedding, top_k=top_k, filters=filters)
        hits, run.confirmed_chunks = await self._confirming.search_confirming(
            embedding, top_k=top_k, filters=filters, chunk_ids=confirm
        )
        return hits

    async def lexical(
        self, plan: SearchPlan, run: SearchRun, *, top_k: int, confirm: bool = True
    ) -> list[ScoredHit] | None:
        """The lexical search; with `confirm`, its hits checked against the truth (else the caller checks them)."""
        started = time.perf_counter()
        searching = (
            self._current_lexical_hits(plan, run, top_k=top_k)
            if confirm
            else self._lexical.search(plan.lexical_query, top_k=top_k, filters=plan.filters)
        )
        with phase(SPAN_ENGINE_PREFIX + self._lexical.name) as span:
            hits, reason = await attempt(
                searching,
                stage=STAGE_LEXICAL,
                deadline=deadline_at(None, plan.lexical_timeout_s),
            )
            note_failure(span, self._lexical.name, reason, result_count=len(hits or ()))
        run.stage_ms[STAGE_LEXICAL] = elapsed_ms(started)
        if reason is not None:
            run.reasons.append(reason)
        else:
            run.leg_hits[LEXICAL_LEG] = _leg_hits(hits)
        run.legs[LEXICAL_LEG] = LegTiming(
            elapsed_ms=run.stage_ms[STAGE_LEXICAL], result_count=len(hits or ()), error=reason
        )
        return hits

    async def _current_lexical_hits(self, plan: SearchPlan, run: SearchRun, *, top_k: int) -> list[ScoredHit]:
        """The lexical leg's hits that the source of truth still holds as they were indexed (`drop_stale`)."""
        hits = await self._lexical.search(plan.lexical_query, top_k=top_k, filters=plan.filters)
        if not hits or self._truth is None:
            return hits
        current, confirmed = await drop_stale(self._truth, plan.filters, hits)
        if not confirmed:
            run.reasons.append(LEXICAL_UNCONFIRMED)
        return current

    @staticmethod
    def record_lexical_hits(run: SearchRun, hits: Sequence[ScoredHit]) -> None:
        """The lexical leg's hits once confirmed after the leg itself returned (one-read hybrid).

        `hits` are those the leg recorded less the stale ones, in order: when none was stale they are recorded
        already, and this runs after the vector read, on the search's critical path.
        """
        recorded = run.leg_hits.get(LEXICAL_LEG)
        if recorded is not None and len(recorded) == len(hits):
            return
        run.leg_hits[LEXICAL_LEG] = _leg_hits(hits)
        run.legs[LEXICAL_LEG] = replace(run.legs[LEXICAL_LEG], result_count=len(hits))

    @staticmethod
    def record_semantic(run: SearchRun, *, hits: Sequence[ScoredHit] | None) -> None:
        """The semantic leg's timing: embedding and vector search together, its error when it failed."""
        run.legs[SEMANTIC_LEG] = LegTiming(
            elapsed_ms=run.semantic_ms,
            result_count=len(hits or ()),
            error=None if hits is not None else run.semantic_error,
        )


def _leg_hits(hits: Sequence[ScoredHit] | None) -> tuple[LegHit, ...]:
    return tuple(LegHit.of(hit) for hit in hits or ())
