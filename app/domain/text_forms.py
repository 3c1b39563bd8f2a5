"""One form for text that reads the same: Unicode NFC. Pure.

"Zürich" arrives precomposed (`ü`, U+00FC: what keyboards type) or decomposed (`u` then U+0308, as
macOS file names and some PDF copies give it). Both render alike, but a lexical analyzer splits the
decomposed form at the combining mark (`zu`, `rich`), so a document written one way was never found
by a query typed the other way, and two spellings of one tag were two tags. Documents are stored, and
queries and tag filters read, in NFC (the form the W3C recommends for exchange; it never changes how
text renders). Identifiers (project, document id, source) are kept byte for byte: they are addresses.

The same holds for the invisible characters that sit inside words without being part of them: a soft
hyphen (U+00AD, common in text pasted from web pages and PDFs), a zero-width space (U+200B), a word
joiner (U+2060), a zero-width no-break space (U+FEFF). A lexical analyzer split `in<ZWSP>visible` into
`in` and `visible`, so neither `invisible` found it. They are dropped from stored text and queries alike.
The joiners that change how a script renders (ZWJ U+200D in emoji sequences, ZWNJ U+200C in Persian) stay.

What the lexical analyzers read (`analysis_form`) goes one step further, without changing what is stored:
every format character (Unicode category Cf: those joiners, the bidi marks, embeddings and isolates that
right-to-left text carries) is dropped, so `Kubernetes<LRM>` and `micro<ZWJ>service` are the words the
reader sees (Lucene's tokenizer kept the mark inside the token, tantivy split the word at it); `İ` is read
as `I` (tantivy lowered it to `i` and a combining dot, which no typed query holds) and a final sigma as
the other (U+03C2 as U+03C3), so a word in capitals (`ΟΔΟΣ`, lowered `οδοσ`) and in running text (`οδος`) are one word.
Marks and letter forms people leave out when they type are read without them, as Latin accents are folded
(`app.domain.ascii_folding`): Arabic harakat and the tatweel, Hebrew points (`DIACRITICS`), the Greek tonos and
dialytika and the Russian `ё` (`FOLDED_LETTERS`), so `محمد` finds `مُحَمَّد`, `שלום` finds `שָׁלוֹם`, `Αθηνα` finds
`Αθήνα` and `елка` finds `ёлка`, and the other way round. Thai, Lao, Khmer and Burmese are written without spaces
between words and no dictionary segments them here: each of their letters, with the vowel signs and tone marks
that follow it, is read as a word of its own (a space before each, `SOUTH_EAST_ASIAN_LETTERS`), as each Han
character is, so `ข้าวผัด` finds a note saying `ฉันชอบกินข้าวผัดกับเพื่อน` and a quoted `"ข้าวผัด"` only the notes
holding those letters in that order.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import replace
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from app.domain.models import Document

FORM: Final = "NFC"
INVISIBLE_IN_WORDS: Final = "\u00ad\u200b\u2060\ufeff"
_DROP_INVISIBLE: Final = str.maketrans("", "", INVISIBLE_IN_WORDS)
_LOWERED_ALONE: Final = str.maketrans({"\u0130": "i", "\u03a3": "\u03c3"})
"""The capitals `str.lower` lowers otherwise than letter by letter: `İ` (to `i` + U+0307), a final `Σ` (to `ς`)."""


def _code_points(character_class: str) -> list[int]:
    """The code points of a regular expression's class body made of single characters and `a-b` ranges."""
    points: list[int] = []
    position = 0
    while position < len(character_class):
        first = last = ord(character_class[position])
        if character_class[position + 1 : position + 2] == "-":
            last = ord(character_class[position + 2])
            position += 2
        points.extend(range(first, last + 1))
        position += 1
    return points


FORMAT_CHARACTERS: Final = (
    "\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891\u08e2\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064"
    "\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U00013438\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f"
)
"""Every format character (general category Cf, Unicode 14), as ranges for a regular expression's class."""
DIACRITICS: Final = (
    "\u0591-\u05bd\u05bf\u05c1\u05c2\u05c4\u05c5\u05c7"
    "\u0610-\u061a\u0640\u064b-\u065f\u0670\u06d6-\u06dc\u06df-\u06e4\u06e7\u06e8\u06ea-\u06ed"
)
"""Every mark of the Hebrew block (points, cantillation) and of the Arabic block (harakat, Quranic marks), and the
tatweel (U+0640, a stroke that stretches a word): day-to-day Hebrew and Arabic are typed without them. Lucene's
ArabicNormalizer drops harakat and the tatweel too."""
FOLDED_LETTERS: Final = {
    "\u03b1": "\u03ac\u0386",
    "\u03b5": "\u03ad\u0388",
    "\u03b7": "\u03ae\u0389",
    "\u03b9": "\u03af\u038a\u03ca\u03aa\u0390",
    "\u03bf": "\u03cc\u038c",
    "\u03c5": "\u03cd\u038e\u03cb\u03ab\u03b0",
    "\u03c9": "\u03ce\u038f",
    "\u0435": "\u0451\u0401",
}
"""Plain lowercase letter -> the letters read as it: Greek vowels with a tonos or dialytika (`ά` and `Ά` as alpha),
the Russian `ё` and `Ё` as `\u0435`."""
ANALYSIS_LETTERS: Final = {
    "\u0130": "I",
    "\u03c2": "\u03c3",
    **{letter: plain for plain, letters in FOLDED_LETTERS.items() for letter in letters},
}
"""Letters the analyzers read as another: `İ` as `I` (lowered to `i`), a final sigma (U+03C2) as the other (U+03C3),
and `FOLDED_LETTERS`."""
ANALYSIS_DROPPED: Final = FORMAT_CHARACTERS + DIACRITICS
"""What `analysis_form` drops, as ranges for a regular expression's class."""
_ANALYSIS_TABLE: Final = str.maketrans(
    {
        **{chr(code): None for code in _code_points(ANALYSIS_DROPPED)},
        **ANALYSIS_LETTERS,
    }
)


SOUTH_EAST_ASIAN_LETTERS: Final = (
    "\u0e01-\u0e30\u0e32\u0e33\u0e3f-\u0e46\u0e4f-\u0e5b"
    "\u0e81\u0e82\u0e84\u0e86-\u0e8a\u0e8c-\u0ea3\u0ea5\u0ea7-\u0eb0\u0eb2\u0eb3\u0ebd\u0ec0-\u0ec4\u0ec6\u0ed0-\u0ed9"
    "\u0edc-\u0edf\u1000-\u102a\u103f-\u1055\u105a-\u105d\u1061\u1065\u1066\u106e-\u1070\u1075-\u1081\u108e"
    "\u1090-\u1099\u109e\u109f\u1780-\u17b3\u17d4-\u17dc\u17e0-\u17e9\u17f0-\u17f9"
)
"""Every assigned character of the Thai, Lao, Myanmar and Khmer blocks but their marks: what starts a term there."""
_SOUTH_EAST_ASIAN_LETTER: Final = re.compile(f"([{SOUTH_EAST_ASIAN_LETTERS}])")


def canonical_text(text: str) -> str:
    """`text` in NFC without `INVISIBLE_IN_WORDS`; the same object when it already is (a few scans)."""
    if any(character in text for character in INVISIBLE_IN_WORDS):
        text = text.translate(_DROP_INVISIBLE)
    return text if unicodedata.is_normalized(FORM, text) else unicodedata.normalize(FORM, text)


def analysis_form(text: str) -> str:
    """`text` as the lexical engines read it: format characters, `DIACRITICS` dropped, letters mapped, Thai spaced.

    Every lexical adapter indexes and queries this form (OpenSearch with char and token filters of the same
    effect, `app.engines.opensearch_mapping`); the stored text keeps the marks, which change how it renders.
    """
    if text.isascii():
        return text
    return _SOUTH_EAST_ASIAN_LETTER.sub(r" \1", text.translate(_ANALYSIS_TABLE))


def lower_as_analyzers(text: str) -> str:
    """`text` lowered one letter at a time, as Lucene's `LowerCaseFilter` and tantivy's `LowerCaser` lower it.

    `str.lower` reads context: it lowers a word-final `Σ` to `ς` (`ΟΔΟΣ` is `οδος`) and `İ` to `i` + U+0307,
    where the engines index `οδοσ` and `istanbul`; a query lowered by it missed the word typed as written.
    """
    return text.translate(_LOWERED_ALONE).lower()


def canonical_tag(tag: str) -> str:
    """`tag` in NFC without white space around it: `"ops "`, split from a list a person typed, is `ops`."""
    return canonical_text(tag).strip()


def canonical_document(document: Document) -> Document:
    """`document` with its searched text (title, text, context, tags) canonical; itself when nothing changes."""
    title, text, context = (canonical_text(value) for value in (document.title, document.text, document.context))
    tags = tuple(canonical_tag(tag) for tag in document.tags)
    if (title, text, context, tags) == (document.title, document.text, document.context, document.tags):
        return document
    return replace(document, title=title, text=text, context=context, tags=tags)
