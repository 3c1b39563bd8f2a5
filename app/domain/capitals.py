"""Where a word's capital says something of it, and where it is only the sentence's or the style's. Pure.

One rule for the two query readers that lean on a capital: the name reader (`app/query/intent.py`, "What did May
say?" may name a speaker May, "May I ask" never) and the date reader (`app/query/dates.py`, "What did Caroline do
May 3?" is May, "May 3 people come?" no date). Inside a sentence neither the modal "may", the verb "march" nor a
stop word is written with a capital, so there a capital says the word is a name or a month. It says nothing where
every sentence writes one (opening the text, or after `.`, `!`, `?` or `:`), nor where the text capitalises all its
words (a Title Case or all-capitals query: "How May 3 Replicas Fail").
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Sequence

TITLE_CASE_MINOR_WORDS: Final = frozenset({
    "a", "an", "the", "and", "but", "or", "nor", "for", "so", "yet", "as", "at", "by", "in", "of", "off", "on",
    "per", "to", "up", "via", "vs", "from", "into", "onto", "over", "with", "than", "upon",
})  # fmt: skip
"""Articles, conjunctions and short prepositions, which Title Case may leave lowercase ("Builds Pass on Arm")."""
MIN_TITLE_CASE_WORDS: Final = 3
"""A text is in Title Case from this many capitalised words (minor words aside): one or two capitals in a row are as
likely two names ("Caroline May 3") as a style."""
SENTENCE_ENDS: Final = (".", "!", "?", ":")
TITLES_BEFORE_NAMES: Final = frozenset({"mr", "mrs", "ms", "dr", "prof", "st"})
"""Their full stop ends no sentence: "What did Dr. May say?" writes May inside one."""

_WORD: Final = re.compile(r"\w[\w'\u2019]*")
_OPENING_MARKS: Final = " \"'(["
_LAST_WORD: Final = re.compile(r"(\w+)\.$")
_TITLE_WINDOW_CHARS: Final = 16
"""Enough of the text before a full stop to hold any of `TITLES_BEFORE_NAMES` (a longer word is none of them)."""


def telling_capitals(text: str) -> frozenset[int]:
    """The offsets in `text` where a word starts whose capital says something: a capitalised word inside a sentence.

    None in a text in Title Case or all capitals (`is_title_case`), nor a word opening the text or a sentence
    (`opens_a_sentence`). A word is a run of letters and digits (an apostrophe inside it kept: "May's"); one starting
    with a digit has no capital.
    """
    words = list(_WORD.finditer(text))
    if is_title_case([word.group() for word in words]):
        return frozenset()
    return frozenset(
        word.start() for word in words if word.group()[0].isupper() and not opens_a_sentence(text, word.start())
    )


def is_title_case(words: Sequence[str]) -> bool:
    """Whether `words` (as written) are in Title Case or all capitals: "How May 3 Replicas Fail", "WHAT IF MAY 3 FAIL".

    Every word that starts with a letter is capitalised, minor words aside ("Can Dec 1 Builds Pass on Arm"), and
    there are at least `MIN_TITLE_CASE_WORDS` of them.
    """
    counted = [word for word in words if word[0].isalpha() and word.lower() not in TITLE_CASE_MINOR_WORDS]
    return len(counted) >= MIN_TITLE_CASE_WORDS and all(word[0].isupper() for word in counted)


def opens_a_sentence(text: str, start: int) -> bool:
    """Whether the word at offset `start` of `text` opens it or a sentence (after `SENTENCE_ENDS`, quotes between).

    A title's full stop ("Dr.", `TITLES_BEFORE_NAMES`) ends none.
    """
    # Read back from the word, not `text[:start]`: a copy per capitalised word was quadratic in a long passage.
    end = start
    while end > 0 and text[end - 1] in _OPENING_MARKS:
        end -= 1
    if end == 0:
        return True
    if not text[end - 1].endswith(SENTENCE_ENDS):
        return False
    title = _LAST_WORD.search(text, max(0, end - _TITLE_WINDOW_CHARS), end)
    return title is None or title.group(1).lower() not in TITLES_BEFORE_NAMES
