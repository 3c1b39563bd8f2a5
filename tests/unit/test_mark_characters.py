"""The combining-mark class holds exactly Unicode's category M (this Python's Unicode version)."""

from __future__ import annotations

import re
import sys
import unicodedata

from app.domain.mark_characters import MARK_CHARACTERS


def test_mark_characters_are_every_character_of_category_m() -> None:
    mark = re.compile(f"[{MARK_CHARACTERS}]")

    listed = {code for code in range(sys.maxunicode + 1) if mark.fullmatch(chr(code))}

    assert listed == {code for code in range(sys.maxunicode + 1) if unicodedata.category(chr(code)).startswith("M")}
