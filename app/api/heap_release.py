"""Hand the C heap's free pages back to the kernel after a large ingest (glibc only).

glibc's malloc keeps what a request freed in its arenas (one per thread that allocated, up to 8 per core),
so without this a replica's resident memory stays near its peak after a large ingest, closer to the pod's
limit for the next one. `malloc_trim(0)` returns the free pages of every arena; it takes ~10-15 ms on a warm
server, in a worker thread. Measured in docs/operations.md "Memory per pod".
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
"""Ingest bodies (by `Content-Length`) from this size on are followed by a trim; smaller ones free too little."""


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
    """After an ingest of `body_bytes`: give free heap pages back to the kernel when the body was large."""
    trim = malloc_trim()
    if trim is not None and body_bytes >= TRIM_AFTER_BODY_BYTES:
        await asyncio.to_thread(trim, 0)
