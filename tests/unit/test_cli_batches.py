"""`poimen ingest`'s batches: at most --batch-size documents, and no more chunks than one write takes."""

from __future__ import annotations

from app.cli.commands import batches
from app.domain.models import Document
from app.ingestion.pipeline import MAX_CHUNKS_PER_REQUEST


def documents(count: int) -> list[Document]:
    return [
        Document(project_id="p", document_id=f"d{index}", source=None, title=None, text="t") for index in range(count)
    ]


def test_batches_hold_batch_size_documents_when_they_are_short() -> None:
    sizes = [len(batch) for batch in batches(documents(130), batch_size=64, chunk_count=lambda _: 1)]

    assert sizes == [64, 64, 2]


def test_a_batch_closes_before_it_would_make_more_chunks_than_one_write_takes() -> None:
    # 64 long notes of 500 chunks each: one batch of 64 was refused whole by the pipeline (32,000 chunks).
    every = documents(64)

    sizes = [len(batch) for batch in batches(every, batch_size=64, chunk_count=lambda _: 500)]

    assert sizes == [24, 24, 16]
    assert 24 * 500 <= MAX_CHUNKS_PER_REQUEST < 25 * 500


def test_every_document_is_in_one_batch_in_order_and_a_huge_one_alone() -> None:
    every = documents(5)
    counts = {"d0": 10, "d1": MAX_CHUNKS_PER_REQUEST + 5, "d2": 10, "d3": 10, "d4": 10}

    found = list(batches(every, batch_size=64, chunk_count=lambda document: counts[document.document_id]))

    assert [[document.document_id for document in batch] for batch in found] == [["d0"], ["d1"], ["d2", "d3", "d4"]]
