"""Shadow searches: the arm not served, run in the background to measure how far the two arms agree.

Contracts:
- `start` never delays or fails the served search: the shadow runs as its own task, may end after the
  request, and a shadow whose every engine failed is dropped (its duration is still recorded).
- Its span is `search.shadow` and engine errors in it count under the shadow's arm.
- Agreement is overlap@`SHADOW_OVERLAP_DEPTH` of chunk ids (0..1), recorded once per finished shadow.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from app.domain.errors import AllEnginesFailedError
from app.observability.metrics import current_arm, record_shadow_overlap, record_shadow_search
from app.observability.spans import SPAN_ATTRIBUTE_ARM
from app.observability.tracing import phase
from app.search.rollout import overlap_at_k

if TYPE_CHECKING:
    from app.domain.models import SearchPlan
    from app.retrieval.searcher import HybridSearcher

SHADOW_OVERLAP_DEPTH = 10


class ShadowSearches:
    """The shadow searches of one service, held until they end so shutdown can wait for them."""

    def __init__(self, searcher: HybridSearcher) -> None:
        self._searcher = searcher
        self._tasks: set[asyncio.Task[None]] = set()

    def start(self, plan: SearchPlan, *, other_arm: str, served_ids: list[str]) -> None:
        """Run `plan` (the arm not served) in the background and record its overlap with `served_ids`."""

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
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def drain(self) -> None:
        """Wait for shadow searches still running (shutdown)."""
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
