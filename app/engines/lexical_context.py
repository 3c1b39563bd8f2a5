"""The text a lexical index files for a chunk: its titled text as content, its context at a low boost.

Content is `titled_text` (the breadcrumb, then the chunk's text) in one field, the same words the
vector leg embeds. The low-boost `context` field holds the chunk's own `Chunk.context` (for a
conversational turn, the previous turn of its session): a term found only there finds the chunk,
below a chunk that says it itself.

An earlier version also put the edges of the neighbouring chunks of the same document in the
context field. It helped no data set (LoCoMo turns are one chunk each, so its gain came from the own
context alone) and cost SciFact train lexical nDCG@10 0.704 -> 0.688 at boost 0.5, so it was dropped.

Every lexical adapter (tantivy, OpenSearch, the in-memory fake) builds its fields with this module,
so they index the same text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from app.domain.models import titled_text

if TYPE_CHECKING:
    from app.domain.models import Chunk

DEFAULT_CONTEXT_BOOST: Final = 1.0
"""Weight of the context field in every lexical adapter (content weighs 2.0); tuned in docs/evaluation.md.

On the LoCoMo tuning conversations the lexical leg reached Recall@10 0.6735 / 0.6967 / 0.7101 at boosts
0.25 / 0.5 / 1.0 (the default z-score fusion 0.7360 / 0.7375 / 0.7415); SciFact chunks have no own context.
"""
DEFAULT_CONTEXT_MAX_CHARS: Final = 2_000
"""Cap of the context field per chunk: a conversational turn or two, not a whole document."""


@dataclass(frozen=True, slots=True)
class LexicalText:
    """The two free-text fields a chunk is searched by (source and tags are filed as they are)."""

    content: str
    context: str


def lexical_text(chunk: Chunk, *, context_max_chars: int = DEFAULT_CONTEXT_MAX_CHARS) -> LexicalText:
    """The content (`titled_text`) and the context (its own, cut at a word boundary) filed for `chunk`."""
    return LexicalText(
        content=titled_text(chunk.breadcrumb, chunk.text), context=_head(chunk.context, context_max_chars)
    )


def _head(text: str, max_chars: int) -> str:
    """At most `max_chars` from the start of `text`, not ending inside a word."""
    if len(text) <= max_chars:
        return text
    cut = text[:max_chars]
    return cut.rpartition(" ")[0] if text[max_chars].isalnum() else cut
