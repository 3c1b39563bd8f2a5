"""Awaiting work that runs in a worker thread to its end, even when the awaiting task is cancelled.

A thread cannot be stopped: a caller that gave up at a cancellation would release its locks while the
thread still writes. `finish_in_thread` waits for the thread on cancellation, then re-raises it.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Coroutine
    from typing import Any


async def finish_in_thread(work: Coroutine[Any, Any, None]) -> None:
    """Await a write's thread; on cancellation, still wait for it (a thread cannot be stopped), then re-raise.

    Keeps the write lock held until the thread ends, so two writes never share a writer.
    """
    task = asyncio.ensure_future(work)
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:
        await asyncio.wait({task})
        if not task.cancelled():
            task.exception()  # retrieved, so asyncio does not log it as never retrieved
        raise
