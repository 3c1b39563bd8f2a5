"""Chinese and Japanese text has no spaces between words: each Han and Hiragana character is a word. Pure.

Lucene's standard tokenizer (OpenSearch) emits each of these characters as a token of its own; tantivy's
analyzer does the same by its tokenizer's pattern (`app.engines.tantivy_schema`). This module gives the
places without a tokenizer of their own the same words: the in-memory fakes' analysis and PostgreSQL's
excluded-term filter (`app.engines.postgres_sql`), which puts a space around each such character.
Katakana runs and Hangul words stay whole, as in Lucene.
"""

from __future__ import annotations

import re
from typing import Final

CJK_CHARACTERS: Final = "\u3040-\u309f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f"
"""Hiragana and the Han ideographs (unified, extension A, compatibility, extensions B onwards), as ranges."""
_CJK: Final = re.compile(f"([{CJK_CHARACTERS}])")


def spaced_cjk(text: str) -> str:
    """`text` with a space either side of each Han or Hiragana character: `東京で` -> ` 東  京  で `."""
    return _CJK.sub(r" \1 ", text)
