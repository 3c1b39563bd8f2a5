"""`validate_documents`: what no store can hold, and the size limit the CLI's ingest holds as the API does."""

from __future__ import annotations

import pytest

from app.domain.errors import DocumentTooLargeError, InvalidInputError
from app.domain.models import Document
from app.ingestion.validation import validate_documents


def note(**fields: object) -> Document:
    values: dict[str, object] = {
        "project_id": "p",
        "document_id": "notes/a.md",
        "source": "notes/a.md",
        "title": "A",
        "text": "some text",
    }
    return Document(**(values | fields))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"text": "a lone \ud800 surrogate"}, "text"),
        ({"title": "\udfff"}, "title"),
        ({"tags": ("ok", "bad \ud83d")}, "tags"),
        ({"metadata": {"\ud800": "key"}}, "metadata"),
        ({"metadata": {"list": ["fine", "x\udc00"]}}, "metadata"),
    ],
)
def test_a_lone_surrogate_in_any_text_is_refused_naming_the_field(fields: dict[str, object], field: str) -> None:
    # A BEIR corpus or an export spells one as a JSON escape; UTF-8 cannot hold it (it failed mid-write).
    with pytest.raises(InvalidInputError, match="lone surrogate") as refused:
        validate_documents([note(**fields)])

    assert refused.value.field == field


def test_a_paired_surrogate_escape_is_an_ordinary_character() -> None:
    validate_documents([note(text="a smile \U0001f600 and caf\u00e9")])


def test_a_document_over_the_size_limit_is_a_document_too_large_naming_what_made_it_so() -> None:
    with pytest.raises(DocumentTooLargeError, match=r"is 101 bytes \(text and metadata\); the limit is 100") as text:
        validate_documents([note(text="x" * 101)], max_document_bytes=100)
    with pytest.raises(DocumentTooLargeError) as metadata:
        validate_documents([note(text="x" * 60, metadata={"note": "y" * 60})], max_document_bytes=100)

    assert text.value.field == "text"
    assert metadata.value.field == "metadata"


def test_a_document_at_the_limit_passes_and_no_limit_checks_no_size() -> None:
    validate_documents([note(text="\u00e9" * 50)], max_document_bytes=100)  # 100 bytes in UTF-8
    validate_documents([note(text="x" * 10_000)])

    with pytest.raises(DocumentTooLargeError):
        validate_documents([note(text="\u00e9" * 51)], max_document_bytes=100)
