"""tantivy's word pattern: `simple`'s words everywhere but Chinese and Japanese, whose characters are words."""

from __future__ import annotations

import pytest
import tantivy

from app.engines.tantivy_schema import WORD_PATTERN

TEXTS = [
    "The p53-dependent apoptosis (IC50 = 3.5 µM) in HeLa cells, 2\u00d710\u2076 per well; x² and ½.",
    "snake_case, kebab-case, dotted.name, e-mail@example.org, https://example.org/a?b=c#d",
    "Zoë's café in Zürich, Zu\u0308rich decomposed, Đoković, straße, ﬁnance",
    "Ελλάδα, Москва, 서울에서 회의, עברית, العربية, हिन्दी, ไทย",
    "emoji 🙂 and symbols ©®™ and tabs\tand\nnewlines",
]


def words(tokenizer: tantivy.Tokenizer, text: str) -> list[str]:
    return tantivy.TextAnalyzerBuilder(tokenizer).build().analyze(text)


@pytest.mark.parametrize("text", TEXTS)
def test_outside_chinese_and_japanese_the_words_are_simple_s(text: str) -> None:
    assert words(tantivy.Tokenizer.regex(WORD_PATTERN), text) == words(tantivy.Tokenizer.simple(), text)


def test_each_han_and_hiragana_character_is_a_word_and_a_katakana_run_is_one() -> None:
    assert words(tantivy.Tokenizer.regex(WORD_PATTERN), "東京で会議、データベースの移行 v2") == [
        *("東", "京", "で", "会", "議", "データベース", "の", "移", "行", "v2"),
    ]
