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
"""

from __future__ import annotations

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


def canonical_text(text: str) -> str:
    """`text` in NFC without `INVISIBLE_IN_WORDS`; the same object when it already is (a few scans)."""
    if any(character in text for character in INVISIBLE_IN_WORDS):
        text = text.translate(_DROP_INVISIBLE)
    return text if unicodedata.is_normalized(FORM, text) else unicodedata.normalize(FORM, text)


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
