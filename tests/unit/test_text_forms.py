"""Text that reads the same is stored and searched in one form (NFC)."""

from __future__ import annotations

import sys
import unicodedata

from app.domain.models import Document
from app.domain.text_forms import ANALYSIS_LETTERS, analysis_form, canonical_document, canonical_text

PRECOMPOSED = "Zoë visited Zürich"
DECOMPOSED = unicodedata.normalize("NFD", PRECOMPOSED)


def test_decomposed_text_becomes_precomposed() -> None:
    assert DECOMPOSED != PRECOMPOSED
    assert canonical_text(DECOMPOSED) == PRECOMPOSED
    assert canonical_text("") == ""


def test_text_already_in_the_form_is_returned_as_is() -> None:
    text = "plain ASCII and précis"
    assert canonical_text(text) is text


def test_a_document_has_its_searched_text_canonical_and_its_addresses_kept() -> None:
    document = Document(
        project_id="p",
        document_id=f"notes/{DECOMPOSED}",
        source=f"trips/{DECOMPOSED}.md",
        title=DECOMPOSED,
        text=f"# {DECOMPOSED}\n\nBody",
        tags=(DECOMPOSED, " plain\n"),
        context=DECOMPOSED,
    )

    canonical = canonical_document(document)

    assert (canonical.title, canonical.context) == (PRECOMPOSED, PRECOMPOSED)
    assert canonical.text == f"# {PRECOMPOSED}\n\nBody"
    assert canonical.tags == (PRECOMPOSED, "plain")
    # Addresses: the id and source are how the caller reads the document back.
    assert (canonical.document_id, canonical.source) == (document.document_id, document.source)


def test_a_document_already_canonical_is_the_same_object() -> None:
    document = Document(project_id="p", document_id="a", source="a.md", title="Café", text="Zürich", tags=("x",))
    assert canonical_document(document) is document


def test_invisible_characters_inside_words_are_dropped_and_visible_joiners_kept() -> None:
    pasted = "in\u200bvisible soft\u00adhyphen fo\u2060o \ufeffbom"
    family = "\U0001f468\u200d\U0001f469\u200d\U0001f467"  # one emoji: its zero-width joiners are part of it
    persian = "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645"  # the non-joiner changes how it is written

    assert canonical_text(pasted) == "invisible softhyphen foo bom"
    assert canonical_text(family) is family
    assert canonical_text(persian) is persian


def test_format_characters_are_every_character_of_category_cf() -> None:
    listed = {ord(character) for character in analysis_form("".join(map(chr, range(sys.maxunicode + 1))))}

    dropped = {code for code in range(sys.maxunicode + 1) if code not in listed} - set(map(ord, ANALYSIS_LETTERS))
    diacritics = {code for code in range(0x590, 0x700) if unicodedata.category(chr(code)).startswith("M")} | {0x640}

    assert dropped - diacritics == {
        code for code in range(sys.maxunicode + 1) if unicodedata.category(chr(code)) == "Cf"
    }
    assert diacritics <= dropped


def test_the_analysis_form_drops_format_characters_and_reads_dotted_i_and_final_sigma_as_lowered_alone() -> None:
    marked = "\u202bKubernetes\u200e micro\u200dservice \u0130stanbul \u03bf\u03b4\u03bf\u03c2"

    assert analysis_form(marked) == "Kubernetes microservice Istanbul \u03bf\u03b4\u03bf\u03c3"
    assert analysis_form("plain ascii") == "plain ascii"


def test_the_analysis_form_drops_arabic_and_hebrew_diacritics_and_folds_greek_accents_and_yo() -> None:
    assert analysis_form("مُحَمَّـــدٌ שָׁלוֹם Αθήνα ΆΪΰ Ёлка") == "محمد שלום Αθηνα αιυ елка"  # noqa: RUF001


def test_the_analysis_form_puts_a_space_before_each_thai_lao_khmer_and_burmese_letter_keeping_its_marks() -> None:
    assert analysis_form("ข้าวผัด ເຂົ້າ បាយ ထမင်း") == " ข้ า ว ผั ด  ເ ຂົ້ າ  បា យ  ထ မ င်း"
