"""Tag keys: what tag filters compare (tags themselves are kept as written)."""

from __future__ import annotations

from app.domain.tags import distinct_tags, tag_key, tag_keys


def test_a_key_is_the_same_for_every_case_of_a_tag() -> None:
    assert tag_key("Kubernetes") == tag_key("KUBERNETES") == tag_key("kubernetes") == "kubernetes"
    assert tag_key("ÉTÉ") == "été"


def test_a_key_keeps_what_is_not_case_or_surrounding_space() -> None:
    assert tag_key(" ci/cd-2024\t") == "ci/cd-2024"
    assert tag_key("a  b") == "a  b"
    assert tag_key("straße") != tag_key("STRASSE")  # lowered, not case-folded: as OpenSearch's normalizer


def test_keys_are_distinct_in_first_seen_order() -> None:
    assert tag_keys(["Ops", "db", "OPS", "ops"]) == ("ops", "db")
    assert tag_keys([]) == ()


def test_distinct_tags_keep_the_first_spelling_of_each_key() -> None:
    assert distinct_tags(["Ops", "db", "ops", "OPS", "Db"]) == ("Ops", "db")
    assert distinct_tags(()) == ()


def test_a_decomposed_tag_has_the_key_of_its_precomposed_form() -> None:
    decomposed = "Zu\u0308rich"  # u + COMBINING DIAERESIS
    assert tag_key(decomposed) == tag_key("Zürich") == "zürich"
    assert tag_keys([decomposed, "ZÜRICH"]) == ("zürich",)


def test_a_key_lowers_letter_by_letter_as_the_lexical_engines_do() -> None:
    # `str.lower` gave `İ` an i and a combining dot and a word-final `Σ` a final sigma; OpenSearch's
    # `lowercase` normalizer keys `istanbul` and `οδοσ`, so those tags were never found there.
    assert tag_key("İstanbul") == "istanbul"
    assert tag_key("ΟΔΟΣ") == "οδοσ"
    assert tag_key("οδος") == "οδος"  # a final sigma typed as such stays one, as OpenSearch keeps it
