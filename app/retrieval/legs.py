"""How the searcher runs one leg's call: by a deadline, with engine failures turned into reasons.

`attempt` awaits an engine call by an event-loop deadline and names the failure (`<stage>_timeout`,
`<stage>_unavailable`) instead of raising, so a failed leg degrades the search rather than failing it.
Only `EngineError`s and timeouts count: any other exception is a bug and propagates. `both` runs two
legs concurrently and never leaves one running when the other raises. `drop_stale` is the lexical leg's
read-your-deletes check against the source of truth.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Final, TypeVar

from app.domain.errors import EngineError, EngineTimeoutError
from app.domain.labels import STAGE_LEXICAL, STAGE_SEMANTIC
from app.observability.metrics import record_engine_error
from app.observability.spans import SPAN_ATTRIBUTE_RESULT_COUNT
from app.observability.tracing import mark_span_failed

if TYPE_CHECKING:
    from collections.abc import Awaitable, Coroutine, Iterable, Mapping, Sequence

    from opentelemetry.trace import Span

    from app.domain.models import Chunk, Filters, ScoredHit
    from app.domain.ports import ChunkTruth

_T = TypeVar("_T")
_U = TypeVar("_U")


def note_failure(span: Span, engine: str, reason: str | None, *, result_count: int | None = None) -> None:
    """Put a stage's outcome on its span; count a failed call (error or timeout) against `engine`.

    The embedder's adapter name varies by model, so its calls count under the fixed name `"embedder"`.
    """
    if result_count is not None and span.is_recording():
        span.set_attribute(SPAN_ATTRIBUTE_RESULT_COUNT, result_count)
    if reason is None:
        return
    record_engine_error(engine)
    mark_span_failed(span, reason)


EMBEDDER_STAGE: Final = "embedder"
"""The query embedding's name in a failure reason (`embedder_timeout`) and in engine error counts."""
LEG_ORDER: Final = (EMBEDDER_STAGE, STAGE_SEMANTIC, STAGE_LEXICAL)
"""The order a search names its degradation reasons in, by the stage a reason's name starts with."""


def in_leg_order(reasons: Iterable[str]) -> tuple[str, ...]:
    """`reasons` by `LEG_ORDER` of their stage, then the rest, each group in the order it came.

    For legs that run at once: the order they failed in is the machine's, this one is always the same.
    """

    def rank(reason: str) -> int:
        stage = reason.split("_", 1)[0]
        return LEG_ORDER.index(stage) if stage in LEG_ORDER else len(LEG_ORDER)

    return tuple(sorted(reasons, key=rank))


def deadline_at(deadline: float | None, timeout_s: float) -> float:
    """`deadline` when given, else `timeout_s` from now (event-loop time)."""
    return asyncio.get_running_loop().time() + timeout_s if deadline is None else deadline


async def attempt(call: Awaitable[_T], *, stage: str, deadline: float) -> tuple[_T | None, str | None]:
    """Await `call` by `deadline` (event-loop time): `(result, None)`, or `(None, reason)` on an engine failure."""
    try:
        async with asyncio.timeout_at(deadline):
            return await call, None
    except (EngineTimeoutError, TimeoutError):
        return None, f"{stage}_timeout"
    except EngineError:
        return None, f"{stage}_unavailable"


async def both(first: Coroutine[object, object, _T], second: Coroutine[object, object, _U]) -> tuple[_T, _U]:
    """Run two coroutines concurrently; when either raises (or we are cancelled), cancel the other."""
    first_task, second_task = asyncio.ensure_future(first), asyncio.ensure_future(second)
    tasks = (first_task, second_task)
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    finally:
        pending = [task for task in tasks if not task.done()]
        for task in pending:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)  # also marks every exception as retrieved
    return first_task.result(), second_task.result()


async def drop_stale(
    truth: ChunkTruth, filters: Filters, hits: Sequence[ScoredHit], *, timeout_s: float | None = None
) -> tuple[list[ScoredHit], bool]:
    """`hits` less those whose chunk the truth no longer holds as indexed, and whether the truth answered.

    The lexical index follows the truth through the outbox, so for a moment it may answer with a chunk
    that was deleted or rewritten (chunk ids are positions), or with one whose document's tags, source or
    event time changed so that `filters` no longer select it: such a hit must not come back. When the
    truth fails or takes longer than `timeout_s`, the hits stand (they may be all the search has) and the
    caller names the search degraded (`LEXICAL_UNCONFIRMED`).
    """
    try:
        async with asyncio.timeout(timeout_s):
            current = await truth.existing_chunks(filters.project_id, [hit.chunk_id for hit in hits], filters=filters)
    except (EngineError, TimeoutError):
        return list(hits), False
    return still_current(hits, current), True


def still_current(hits: Sequence[ScoredHit], current: Mapping[str, str]) -> list[ScoredHit]:
    """`hits` whose chunk `current` (chunk id -> hash, as the truth holds it now) has with the same content."""
    return [hit for hit in hits if is_current(hit.chunk, current)]


def is_current(chunk: Chunk, current: Mapping[str, str]) -> bool:
    """Whether `current` (chunk id -> hash, as the truth holds it now) has `chunk` with the same content."""
    return current.get(chunk.chunk_id) == chunk.chunk_hash
