"""Folding to ASCII where no engine filter does it: the fakes and PostgreSQL's excluded-term filter."""

from __future__ import annotations

import tantivy

from app.domain.ascii_folding import fold_to_ascii

# Every letter of Latin-1 Supplement and Latin Extended-A that folds, with its ASCII form.
FOLDED_LETTERS = {
    chr(code): fold_to_ascii(chr(code))
    for code in range(0x00C0, 0x0180)
    if chr(code).isalpha() and fold_to_ascii(chr(code)) != chr(code) and fold_to_ascii(chr(code)).isalpha()
}

# tantivy 0.27 folds these after lowercasing into what is not the lowered ASCII letter (`ǧ` -> `G`).
TANTIVY_QUIRKS = frozenset("İ")


def test_latin_letters_lose_their_accents() -> None:
    assert fold_to_ascii("Zoë, Đoković, šta, Straße, Æsir, façade") == "Zoe, Dokovic, sta, Strasse, AEsir, facade"


def test_text_without_latin_accents_is_kept() -> None:
    text = "plain ascii 8080"
    assert fold_to_ascii(text) is text
    assert fold_to_ascii("Ω42 東京") == "Ω42 東京"


def test_latin_1_and_extended_a_letters_fold_to_ascii_letters() -> None:
    assert len(FOLDED_LETTERS) > 180
    assert all(ascii_form.isascii() for ascii_form in FOLDED_LETTERS.values())


def test_latin_letters_fold_as_tantivy_folds_them() -> None:
    analyzer = (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.ascii_fold())
        .build()
    )

    differing = {
        letter: analyzer.analyze(f"x{letter}x")
        for letter, ascii_form in FOLDED_LETTERS.items()
        if letter not in TANTIVY_QUIRKS and analyzer.analyze(f"x{letter}x") != [f"x{ascii_form.lower()}x"]
    }

    assert differing == {}
