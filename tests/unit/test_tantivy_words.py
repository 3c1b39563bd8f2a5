"""tantivy's word pattern: `simple`'s words but in Chinese and Japanese, whose characters are words, and at a mark."""

from __future__ import annotations

import pytest
import tantivy

from app.engines.tantivy_schema import WORD_PATTERN

TEXTS = [
    "The p53-dependent apoptosis (IC50 = 3.5 µM) in HeLa cells, 2\u00d710\u2076 per well; x² and ½.",
    "snake_case, kebab-case, dotted.name, e-mail@example.org, https://example.org/a?b=c#d",
    "Zoë's café in Zürich, Đoković, straße, ﬁnance",
    "Ελλάδα, Москва, 서울에서 회의, עברית, العربية, ไทย",
    "emoji 🙂 and symbols ©®™ and tabs\tand\nnewlines",
]


def words(tokenizer: tantivy.Tokenizer, text: str) -> list[str]:
    return tantivy.TextAnalyzerBuilder(tokenizer).build().analyze(text)


@pytest.mark.parametrize("text", TEXTS)
def test_outside_chinese_and_japanese_and_marks_the_words_are_simple_s(text: str) -> None:
    assert words(tantivy.Tokenizer.regex(WORD_PATTERN), text) == words(tantivy.Tokenizer.simple(), text)


def test_each_han_and_hiragana_character_is_a_word_and_a_katakana_run_is_one() -> None:
    assert words(tantivy.Tokenizer.regex(WORD_PATTERN), "東京で会議、データベースの移行 v2") == [
        *("東", "京", "で", "会", "議", "データベース", "の", "移", "行", "v2"),
    ]


def test_a_combining_mark_is_part_of_the_word_it_follows() -> None:
    # `simple` cut a word at a mark that is not Alphabetic: a virama, a nukta, a Thai tone mark, a decomposed accent.
    text = "Zu\u0308rich \u0939\u093f\u0928\u094d\u0926\u0940 \u092a\u0922\u093c\u0928\u093e \u0e02\u0e49\u0e32\u0e27"

    assert words(tantivy.Tokenizer.regex(WORD_PATTERN), text) == text.split()
    assert len(words(tantivy.Tokenizer.simple(), text)) > len(text.split())


def test_a_mark_after_no_letter_is_no_word() -> None:
    # LoCoMo's 🧘<ZWJ>♀<VS16>: the variation selector is a mark that follows a symbol.
    assert words(tantivy.Tokenizer.regex(WORD_PATTERN), "Keep it up! \U0001f9d8\u200d\u2640\ufe0f ok") == [
        *("Keep", "it", "up", "ok"),
    ]
