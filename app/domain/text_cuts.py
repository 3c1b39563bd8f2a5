"""Shortening text for display without cutting a character as a reader sees it (a grapheme) in two. Pure.

A character on screen can be several code points: a letter and its vowel signs or tone marks (Thai `ข้`,
Devanagari `कि`), a decomposed accent, an emoji sequence joined by U+200D (`👩‍💻`) or carrying a skin tone.
Cut between them, the kept part shows another letter (`ข` without its tone mark is another syllable) or
a dangling joiner. This is the everyday subset of Unicode's grapheme rules (UAX #29), no dependency needed.
"""

from __future__ import annotations

import re
from typing import Final

from app.domain.mark_characters import MARK_CHARACTERS

ELLIPSIS: Final = "\u2026"
ZERO_WIDTH_JOINER: Final = "\u200d"
_EXTENDS: Final = re.compile(f"[{MARK_CHARACTERS}\u200d\U0001f3fb-\U0001f3ff\U000e0020-\U000e007f]")
"""What belongs to the character before it: a mark, the joiner, an emoji skin tone, an emoji tag."""


def shortened(text: str, *, max_chars: int) -> str:
    """`text` as is when it has at most `max_chars` code points, else its start and `ELLIPSIS` in `max_chars`.

    The cut moves back to the start of the character it would split, so the result may be shorter.
    """
    if len(text) <= max_chars:
        return text
    cut = max_chars - len(ELLIPSIS)
    while cut > 0 and (_EXTENDS.match(text, cut) or text[cut - 1] == ZERO_WIDTH_JOINER):
        cut -= 1
    return text[:cut] + ELLIPSIS
