"""How a search runs each leg against its port: timed, traced, degraded on failure, recorded on the run.

`LegRunner` holds the ports and runs one leg's call at a time for the searcher's strategies: embedding the
query, the vector search, and the lexical search (confirmed against the source of truth, `drop_stale`). Each
call records its stage time, its `LegTiming` and its ranking on the `SearchRun`, and names a failure as a
reason instead of raising (`attempt`), so the strategy decides what a missing leg means.

With a `ConfirmingVectorIndex` (pgvector), `read_ahead` opens the search's read of the store while the query
is embedded, and both the vector search and the lexical hits' confirmation run in it. When the index lets the
read begin at once (few searches in flight: `VectorRead.began`), the transaction's opening overlaps the
embedding, and so does the confirmation when the lexical leg is done first (it usually is): neither waits on
the search's critical path. Otherwise the read begins with the vector search, and hybrid confirms after it.
"""

from __future__ import annotations

import asyncio
import time
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from app.domain.errors import EngineError
from app.domain.labels import LEXICAL_UNCONFIRMED, STAGE_EMBED, STAGE_LEXICAL, STAGE_SEMANTIC
from app.domain.models import LEXICAL_LEG, SEMANTIC_LEG, ScoredHit
from app.domain.ports import ConfirmingVectorIndex
from app.domain.results import LegHit, LegTiming
from app.observability.tracing import phase
from app.retrieval.legs import EMBEDDER_STAGE, attempt, deadline_at, drop_stale, note_failure

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence

    from app.domain.models import Filters, SearchPlan
    from app.domain.ports import ChunkTruth, Embedder, LexicalIndex, VectorIndex, VectorRead

SPAN_EMBED: Final = "search.embed"
SPAN_ENGINE_PREFIX: Final = "search.engine."
CONFIRMATION_WAIT_SHARE: Final = 0.5
"""Of the lexical leg's time (`lexical_timeout_s`), the most its hits wait for the vector search to be confirmed
after it (`LegRunner.read_ahead`); the rest is for confirming them on their own when the embedding is slow."""


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


class LegRunner:
    """Runs the legs of a search against the ports. Stateless: one instance serves concurrent searches."""

    def __init__(
        self, *, vector: VectorIndex, lexical: LexicalIndex, embedder: Embedder, truth: ChunkTruth | None
    ) -> None:
        self._truth = truth
        self._vector = vector
        # Decided once: a runtime Protocol check reads every member, too slow for every search.
        self._confirming = vector if isinstance(vector, ConfirmingVectorIndex) else None
        self._lexical = lexical
        self._embedder = embedder

    @asynccontextmanager
    async def read_ahead(
        self, plan: SearchPlan, *, confirm_after_search: bool = False
    ) -> AsyncIterator[ReadAhead | None]:
        """The vector index's read of the plan's project, opening meanwhile; None when the index has no such read.

        Pass it to `semantic`, `vector_search` and `lexical`: each waits for it to open, and fails as its opening
        did (the search then degrades as when its vector read fails). At exit a read still opening is abandoned,
        and a read that cannot end cleanly is dropped: the legs' answers are in by then.

        `confirm_after_search`: when the read did not begin at once (the store is busy: `VectorRead.began`), the
        lexical hits are confirmed once `semantic` is done, in the transaction its search began; confirmed
        before, they would begin it and hold its connection through the embedding. They wait for it at most
        `CONFIRMATION_WAIT_SHARE` of the lexical leg's time, then confirm on their own. Not for a strategy whose
        vector search waits for the lexical leg (cascading): each would wait for the other.
        """
        if self._confirming is None:
            yield None
            return
        read = self._confirming.read(plan.filters.project_id)
        stack = AsyncExitStack()
        opening = asyncio.ensure_future(stack.enter_async_context(read))
        # Past this (event-loop time) the lexical hits confirm on their own rather than wait for the vector
        # search: a slow embedding (a busy embedder) must not run the lexical leg out of its own time.
        confirm_by = asyncio.get_running_loop().time() + plan.lexical_timeout_s * CONFIRMATION_WAIT_SHARE
        try:
            yield ReadAhead(opening, confirm_after_search=confirm_after_search, confirm_by=confirm_by)
        finally:
            await _close(stack, opening)

    async def semantic(
        self, plan: SearchPlan, run: SearchRun, *, top_k: int, filters: Filters, read: ReadAhead | None = None
    ) -> list[ScoredHit] | None:
        """Embed, then search vectors (in `read` when given), both within one `semantic_timeout_s` deadline."""
        try:
            deadline = asyncio.get_running_loop().time() + plan.semantic_timeout_s
            embedding = await self.embed(plan, run, deadline=deadline)
            if embedding is None:
                self.record_semantic(run, hits=None)
                return None
            return await self.vector_search(
                plan, run, embedding, top_k=top_k, filters=filters, deadline=deadline, read=read
            )
        finally:
            if read is not None:
                read.searched.set()

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
        read: ReadAhead | None = None,
    ) -> list[ScoredHit] | None:
        """Search vectors, in `read` when given (`read_ahead`), else in a read of their own."""
        started = time.perf_counter()
        searching = (read or self._vector).search(embedding, top_k=top_k, filters=filters)
        with phase(SPAN_ENGINE_PREFIX + self._vector.name) as span:
            hits, reason = await attempt(
                searching,
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

    async def lexical(
        self, plan: SearchPlan, run: SearchRun, *, top_k: int, read: ReadAhead | None = None
    ) -> list[ScoredHit] | None:
        """The lexical search, its hits checked against the truth (`drop_stale`), in `read` when given."""
        started = time.perf_counter()
        searching = self._current_lexical_hits(plan, run, top_k=top_k, read=read)
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

    async def _current_lexical_hits(
        self, plan: SearchPlan, run: SearchRun, *, top_k: int, read: ReadAhead | None
    ) -> list[ScoredHit]:
        """The lexical leg's hits that the source of truth still holds as they were indexed (`drop_stale`)."""
        hits = await self._lexical.search(plan.lexical_query, top_k=top_k, filters=plan.filters)
        if not hits or self._truth is None:
            return hits
        # The vector index's read holds the truth's own rows (`ConfirmingVectorIndex`): one read for both legs.
        current, confirmed = await drop_stale(read or self._truth, plan.filters, hits)
        if not confirmed:
            run.reasons.append(LEXICAL_UNCONFIRMED)
        return current

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


class ReadAhead:
    """A `VectorRead` that may still be opening: each call waits for it, and fails as its opening did.

    `searched` is set once the semantic leg is done (`LegRunner.semantic`), hits or none.
    """

    def __init__(
        self, opening: asyncio.Future[VectorRead], *, confirm_after_search: bool, confirm_by: float | None = None
    ) -> None:
        self._opening = opening
        self._confirm_after_search = confirm_after_search
        self._confirm_by = confirm_by  # event-loop time; None: no bound
        self.searched = asyncio.Event()

    async def search(self, embedding: Sequence[float], *, top_k: int, filters: Filters) -> list[ScoredHit]:
        """`VectorRead.search`, once the read is open."""
        # Shielded: a leg that gives up waiting must not cancel the opening the other leg may still use.
        read = await asyncio.shield(self._opening)
        return await read.search(embedding, top_k=top_k, filters=filters)

    async def existing_chunks(
        self, project_id: str, chunk_ids: Sequence[str], *, filters: Filters | None = None
    ) -> dict[str, str]:
        """`VectorRead.existing_chunks`, once the read is open (and searched, when it did not begin at once).

        Not searched by `confirm_by`, it confirms on its own.
        """
        read = await asyncio.shield(self._opening)
        if self._confirm_after_search and not read.began:
            await self._searched_or_due()
        return await read.existing_chunks(project_id, chunk_ids, filters=filters)

    async def _searched_or_due(self) -> None:
        """Once the semantic leg is done, or `confirm_by` has come (whichever is first)."""
        timeout = None if self._confirm_by is None else max(0.0, self._confirm_by - asyncio.get_running_loop().time())
        with suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self.searched.wait()


async def _close(stack: AsyncExitStack, opening: asyncio.Future[VectorRead]) -> None:
    """End a `read_ahead` read: abandon it while it is still opening, else leave it (its rollback)."""
    if not opening.done():
        opening.cancel()
    await asyncio.wait({opening})
    if not opening.cancelled():
        opening.exception()  # retrieved: a read that failed to open is each leg's reason already
    # A read that cannot end cleanly drops its connection (the adapter's); the legs' answers are in.
    with suppress(EngineError):
        await stack.aclose()
