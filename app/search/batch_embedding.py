"""A batch search's query embeddings: computed together, in calls each held to one search's deadline.

One deadline for the whole batch (the semantic leg's, sized for one search) let 32 long queries run out
of it: the batch embedding timed out, then every search embedded on its own behind the same worker and
most of those timed out too, so a full batch of the longest queries came back degraded on an idle machine.
Each call here carries at most the text of one longest query (`QUERY_MAX_CHARS`), which that deadline
must already allow a single search, so a batch of short queries is still one call and one of long
queries gets one deadline per query.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from app.domain.errors import EngineError

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from app.domain.ports import Embedder

logger = logging.getLogger("poimen.search")


def calls_of(texts: Sequence[str], *, max_chars: int) -> Iterator[list[str]]:
    """`texts` in order, cut into runs of at most `max_chars` characters in all (a longer text alone)."""
    run: list[str] = []
    size = 0
    for text in texts:
        if run and size + len(text) > max_chars:
            yield run
            run, size = [], 0
        run.append(text)
        size += len(text)
    if run:
        yield run


async def embed_batch(
    embedder: Embedder, texts: Sequence[str], *, scope: str, max_chars: int, timeout_s: float
) -> dict[str, list[float]]:
    """Each of `texts` embedded (text -> vector), in calls of at most `max_chars` characters, each within `timeout_s`.

    The first call that fails or runs out of time ends it: the texts embedded so far are returned, and
    the caller embeds the others one search at a time (each under its own deadline, degrading as a single
    search does), so a hung embedder holds the batch for one deadline, not one per call.
    """
    embedded: dict[str, list[float]] = {}
    for call in calls_of(texts, max_chars=max_chars):
        try:
            async with asyncio.timeout(timeout_s):
                vectors = await embedder.embed_queries(call, scope=scope)
        except EngineError:
            logger.warning("batch query embedding failed: %d searches embed on their own", len(texts) - len(embedded))
            break
        except TimeoutError:
            logger.warning(
                "batch query embedding took over %s s: %d searches embed on their own",
                timeout_s,
                len(texts) - len(embedded),
            )
            break
        embedded.update(zip(call, vectors, strict=True))
    return embedded
