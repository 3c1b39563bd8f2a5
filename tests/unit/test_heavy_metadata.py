"""An ingest body's metadata is weighed before it is decoded: its size per document, its values per request."""

from __future__ import annotations

import json

import pytest

from app.api.heavy_metadata import MAX_METADATA_VALUES, refuse_heavy_metadata
from app.domain.errors import DocumentTooLargeError, InvalidInputError

LIMIT_BYTES = 5_000_000


def body(*metadata: object) -> bytes:
    documents = [{"id": f"d{number}", "text": "Short.", "metadata": value} for number, value in enumerate(metadata)]
    return json.dumps(documents[0] if len(documents) == 1 else {"documents": documents}).encode()


def test_one_documents_metadata_of_too_many_values_is_refused() -> None:
    # 1,000,001 values in 3 MB: under the size limit, and 1.4 GB of objects had it been decoded first.
    with pytest.raises(InvalidInputError, match=f"at most {MAX_METADATA_VALUES}") as refused:
        refuse_heavy_metadata(body({"a": [[]] * 1_000_000}), batch=False, max_document_bytes=LIMIT_BYTES)

    assert refused.value.field == "metadata"


def test_the_values_of_a_batch_count_together() -> None:
    heavy = body(*({"a": [0] * (MAX_METADATA_VALUES // 3)} for _ in range(4)))

    with pytest.raises(InvalidInputError, match="metadata of this request"):
        refuse_heavy_metadata(heavy, batch=True, max_document_bytes=LIMIT_BYTES)


def test_metadata_over_the_document_limit_is_a_413_naming_the_document() -> None:
    with pytest.raises(DocumentTooLargeError, match=r"document 'd0': its metadata alone is \d+ bytes"):
        refuse_heavy_metadata(body({"k": "v" * 5000}), batch=False, max_document_bytes=4000)


@pytest.mark.parametrize(
    "metadata",
    [
        {"speaker": "Alice", "session": 3, "tags": ["a", "b"]},
        {"notes": "a, [b], {c}, " * 100_000},  # commas and brackets inside a string are no values
        {"turns": [{"n": number} for number in range(30_000)]},
    ],
)
def test_ordinary_metadata_passes(metadata: object) -> None:
    refuse_heavy_metadata(body(metadata), batch=False, max_document_bytes=LIMIT_BYTES)


def test_a_body_of_another_shape_is_left_to_the_typed_decode() -> None:
    refuse_heavy_metadata(b'{"id": 7, "metadata": [1, 2]}', batch=False, max_document_bytes=LIMIT_BYTES)
    refuse_heavy_metadata(b'{"documents": "none"}', batch=True, max_document_bytes=LIMIT_BYTES)
