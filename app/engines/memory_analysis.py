"""The in-memory adapters' English analysis: words folded to ASCII, Lucene's stop words, a light stemmer, phrases.

Shared by the lexical fake (what it scores) and by the filters every fake applies (an excluded term).
Its stemmer is a light suffix stripper, not Snowball: some stems differ from tantivy's and PostgreSQL's;
the behaviour the contract suites check is the same.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

from app.domain.ascii_folding import fold_to_ascii
from app.domain.mark_characters import MARK_CHARACTERS
from app.domain.text_forms import analysis_form, lower_as_analyzers
from app.engines.cjk import CJK_CHARACTERS

if TYPE_CHECKING:
    from collections.abc import Sequence

MAX_TOKEN_CHARS: Final = 40
MIN_STEM_CHARS: Final = 3

# Lucene's English stop words, the list tantivy's `stopword("english")` and OpenSearch's `_english_` use.
ENGLISH_STOP_WORDS: Final = frozenset(
    (
        *("a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it", "no"),
        *("not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these", "they", "this"),
        *("to", "was", "will", "with"),
    )
)
_LETTER: Final = f"[^\\W_{CJK_CHARACTERS}]"
# A Han or Hiragana character is a word; a mark (a vowel sign, a virama) is part of the word it follows.
_WORD = re.compile(f"[{CJK_CHARACTERS}]|{_LETTER}(?:{_LETTER}|[{MARK_CHARACTERS}])*")
_VOWELS = frozenset("aeiouy")
_UNDOUBLED_ENDINGS = frozenset("lsz")


def light_stem(word: str) -> str:
    """Strip common English inflections (plural, -ing, -ed, final e/y) so `running` and `run` meet."""
    if len(word) <= MIN_STEM_CHARS:
        return word
    if word.endswith(("sses", "ies")):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    for suffix in ("ing", "ed"):
        stem = word[: -len(suffix)]
        if word.endswith(suffix) and len(stem) >= MIN_STEM_CHARS and _VOWELS.intersection(stem):
            word = stem
            if word[-1] == word[-2] and word[-1] not in _VOWELS | _UNDOUBLED_ENDINGS:
                word = word[:-1]
            break
    if len(word) > MIN_STEM_CHARS + 1 and word.endswith("e"):
        word = word[:-1]
    if word.endswith("y"):
        word = word[:-1] + "i"
    return word


def analyze(text: str) -> list[tuple[int, str]]:
    """(position, term) pairs: lowercase words folded to ASCII, stop and over-long words dropped, stemmed.

    A dropped word keeps its position, so a phrase does not match across a removed word.
    """
    return [
        (position, light_stem(word))
        for position, word in enumerate(
            fold_to_ascii(lower_as_analyzers(match.group())) for match in _WORD.finditer(analysis_form(text))
        )
        if word not in ENGLISH_STOP_WORDS and len(word) <= MAX_TOKEN_CHARS
    ]


def holds_phrase(value: Sequence[tuple[int, str]], phrase: Sequence[tuple[int, str]]) -> bool:
    """Whether the analysed `value` holds the analysed `phrase`'s terms at their relative positions."""
    if not phrase:
        return False
    first = phrase[0][0]
    wanted = [(position - first, term) for position, term in phrase]
    located = set(value)
    return any(
        term == wanted[0][1] and all((start + offset, word) in located for offset, word in wanted)
        for start, term in value
    )
