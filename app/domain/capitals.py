"""Where a word's capital says something of it, and where it is only the sentence's. Pure.

Read by the date reader (`app/query/dates.py`, "What did Caroline do May 3?" is May, "May 3 people come?" no date).
Inside a sentence neither the modal "may", the verb "march" nor a stop word is written with a capital, so there a
capital says the word is a name or a month. It says nothing where every sentence writes one (opening the text, or
after `.`, `!`, `?` or `:`).
"""

from __future__ import annotations

import re
from typing import Final

SENTENCE_ENDS: Final = (".", "!", "?", ":")

_WORD: Final = re.compile(r"\w[\w'\u2019]*")
_OPENING_MARKS: Final = " \"'(["


def telling_capitals(text: str) -> frozenset[int]:
    """The offsets in `text` where a word starts whose capital says something: a capitalised word inside a sentence.

    Not a word opening the text or a sentence (`opens_a_sentence`). A word is a run of letters and digits (an
    apostrophe inside it kept: "May's"); one starting with a digit has no capital.
    """
    return frozenset(
        word.start()
        for word in _WORD.finditer(text)
        if word.group()[0].isupper() and not opens_a_sentence(text, word.start())
    )


def opens_a_sentence(text: str, start: int) -> bool:
    """Whether the word at offset `start` of `text` opens it or a sentence (after `SENTENCE_ENDS`, quotes between)."""
    before = text[:start].rstrip(_OPENING_MARKS)
    return not before or before.endswith(SENTENCE_ENDS)
