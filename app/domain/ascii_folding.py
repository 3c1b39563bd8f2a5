"""Folding to ASCII as Lucene's `ASCIIFoldingFilter` does it for Latin letters: `résumé` -> `resume`. Pure.

The lexical engines fold with their own filters (tantivy `ascii_fold`, OpenSearch `asciifolding`); this
module is for the places that must agree with them without such a filter: the in-memory fakes' analysis
and PostgreSQL's excluded-term filter (`app.engines.postgres_sql`), which folds the text it checks the
same way in SQL: `UNDECOMPOSABLE` replaced, then `normalize(..., NFKD)` and the combining marks dropped
(the embedded PostgreSQL has no `unaccent`).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Final

UNDECOMPOSABLE: Final = {
    "ß": "ss",
    "æ": "ae",
    "Æ": "AE",
    "œ": "oe",
    "Œ": "OE",
    "ø": "o",
    "Ø": "O",
    "đ": "d",
    "Đ": "D",
    "ł": "l",
    "Ł": "L",
    "þ": "th",
    "Þ": "TH",
    "ð": "d",
    "Ð": "D",
    "\u0131": "i",
    "Ħ": "H",
    "ħ": "h",
    "Ŋ": "N",
    "ŋ": "n",
    "Ŧ": "T",
    "ŧ": "t",
    "ƒ": "f",
    "ĸ": "q",
    "Ŀ": "L",
    "ŀ": "l",
    "ŉ": "n",
}
"""Latin letters with no compatibility decomposition that Lucene still folds, and their ASCII forms."""
_UNDECOMPOSABLE_TABLE: Final = str.maketrans(UNDECOMPOSABLE)
COMBINING_MARKS: Final = "\u0300-\u036f"
"""The combining diacritical marks (a range): what NFKD splits off Latin letters, and folding drops."""
_COMBINING: Final = re.compile(f"[{COMBINING_MARKS}]")


def fold_to_ascii(text: str) -> str:
    """`text` with its Latin letters' accents dropped (`Đoković` -> `Dokovic`); ASCII text is returned as is.

    Latin-1 and Latin Extended-A fold as tantivy and Lucene fold them; a few rare letters the engines fold
    (`Ɓ`, `Ə`) are kept, so a fake or an excluded term may disagree with the engines on those.
    """
    if text.isascii():
        return text
    decomposed = unicodedata.normalize("NFKD", text.translate(_UNDECOMPOSABLE_TABLE))
    return _COMBINING.sub("", decomposed)
