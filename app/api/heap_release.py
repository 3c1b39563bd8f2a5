"""Hand the C heap's free pages back to the kernel after a request with a large body (glibc only).

glibc's malloc keeps what a request freed in its arenas (one per thread that allocated, up to 8 per core),
so without this a replica's resident memory stays near its peak after a large body, closer to the pod's
limit for the next one. `malloc_trim(0)` returns the free pages of every arena; it takes ~10-15 ms on a warm
server, in a worker thread. Measured in docs/operations.md "Memory per pod".

Any large body, not only an ingest's: 16 search bodies of 50 MB at once (refused 400, their query too long)
left the server 391 MiB over where it started for good, and one trim gave back 460 MiB. The limiter in front
of every request (`app.api.overload`) counts what each body brought and calls `HeapTrimmer.release` after it.
"""

from __future__ import annotations

import asyncio
import ctypes
import functools
import platform
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Callable

TRIM_AFTER_BODY_BYTES: Final = 1024 * 1024
"""Request bodies (bytes received) from this size on are followed by a trim; smaller ones free too little."""


@functools.cache
def malloc_trim() -> Callable[[int], int] | None:
    """The C library's `malloc_trim` when it is glibc; None on another (musl, macOS) or when it cannot be loaded."""
    if platform.libc_ver()[0] != "glibc":
        return None
    try:
        trim = ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


async def release_free_heap(body_bytes: int) -> None:
    """After a request body of `body_bytes`: give free heap pages back to the kernel when the body was large."""
    trim = malloc_trim()
    if trim is not None and body_bytes >= TRIM_AFTER_BODY_BYTES:
        await asyncio.to_thread(trim, 0)


class HeapTrimmer:
    """One trim at a time for one event loop: requests ending while one runs get one more trim after it, not one each.

    Sixteen large bodies ending together made sixteen trims contend for the arenas' locks, each walking the
    same free pages; what they freed after the running trim began is still returned by the one that follows.
    """

    def __init__(self) -> None:
        self._running = False
        self._again = False

    async def release(self, body_bytes: int) -> None:
        """After a request body of `body_bytes`: trim when it was large, or have the running trim go once more."""
        if body_bytes < TRIM_AFTER_BODY_BYTES or malloc_trim() is None:
            return
        if self._running:
            self._again = True
            return
        self._running = True
        try:
            self._again = True
            while self._again:
                self._again = False
                await release_free_heap(body_bytes)
        finally:
            self._running = False
