"""The text a lexical index files under a chunk's low-boost `context` field.

A chunk is scored on its own words, but a query often names what the rest of its document says: the
title of a split abstract, the question a conversational turn answers. So each chunk also carries
its own `Chunk.context` (given by the document, e.g. the previous turn) and the nearest words of the
chunks around it in the same document, searched at a low boost. A term found only there finds the
chunk, but below a chunk that says it itself.

Every lexical adapter (tantivy, OpenSearch, the in-memory fake) builds the field with this function,
so they index the same text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Sequence

    from app.domain.models import Chunk

DEFAULT_CONTEXT_BOOST: Final = 0.5
"""Weight of the context field in every lexical adapter (content weighs 2.0); tuned in docs/evaluation.md."""
DEFAULT_CONTEXT_MAX_CHARS: Final = 2_000
"""Cap of the context field per chunk: enough for a turn and the edges of both neighbours."""


def neighbour_contexts(chunks: Sequence[Chunk], *, max_chars: int = DEFAULT_CONTEXT_MAX_CHARS) -> dict[str, str]:
    """The context text of each chunk of one document, by chunk id.

    `chunks` is a document's full chunk set (any order; position decides the neighbours). A chunk's
    context is its own `context` first, then the end of the chunk before it and the start of the chunk
    after it, each given half of what the own context leaves of `max_chars`, cut at a word boundary.
    """
    ordered = sorted(chunks, key=lambda chunk: (chunk.position, chunk.chunk_id))
    contexts: dict[str, str] = {}
    for index, chunk in enumerate(ordered):
        own = _head(chunk.context, max_chars)
        budget = max(max_chars - len(own), 0) // 2
        before = _tail(ordered[index - 1].text, budget) if index > 0 else ""
        after = _head(ordered[index + 1].text, budget) if index + 1 < len(ordered) else ""
        contexts[chunk.chunk_id] = "\n".join(part for part in (own, before, after) if part)
    return contexts


def _head(text: str, max_chars: int) -> str:
    """At most `max_chars` from the start of `text`, not ending inside a word."""
    if len(text) <= max_chars:
        return text
    cut = text[:max_chars]
    return cut.rpartition(" ")[0] if text[max_chars].isalnum() else cut


def _tail(text: str, max_chars: int) -> str:
    """At most `max_chars` from the end of `text`, not starting inside a word."""
    if len(text) <= max_chars:
        return text
    if max_chars <= 0:
        return ""
    cut = text[-max_chars:]
    return cut.partition(" ")[2] if text[-max_chars - 1].isalnum() else cut
