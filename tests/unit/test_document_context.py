"""A document's optional `context` is embedded with its chunks but never becomes their text."""

from __future__ import annotations

from dataclasses import replace

from app.domain.models import Document
from app.ingestion.chunking import ChunkingPolicy
from app.ingestion.pipeline import IngestionPipeline, content_hash, embedding_text

POLICY = ChunkingPolicy(max_chars=200, overlap_chars=0, min_chars=0)
DOCUMENT = Document(project_id="p", document_id="d", source="s", title="Caroline", text="Yes, a sunrise.")


class _NoStore:
    name = "none"


class _NoEmbedder:
    name = "none"
    model_name = "m"
    dimensions = 1


def chunks_of(document: Document) -> list:
    pipeline = IngestionPipeline(store=_NoStore(), embedder=_NoEmbedder(), policy=POLICY)  # type: ignore[arg-type]
    return pipeline.chunk(document)


def test_context_is_embedded_after_the_chunk_text() -> None:
    document = replace(DOCUMENT, context="Melanie: What did you paint?")

    [chunk] = chunks_of(document)

    assert chunk.text == "Yes, a sunrise."
    assert embedding_text(chunk) == "Caroline\nYes, a sunrise.\nMelanie: What did you paint?"


def test_without_context_the_embedded_text_and_hashes_are_unchanged() -> None:
    [chunk] = chunks_of(DOCUMENT)

    assert embedding_text(chunk) == "Caroline\nYes, a sunrise."
    assert content_hash(DOCUMENT, policy=POLICY, embedding_model="m") == content_hash(
        replace(DOCUMENT, context=""), policy=POLICY, embedding_model="m"
    )


def test_changing_the_context_changes_the_hashes() -> None:
    with_context = replace(DOCUMENT, context="Melanie: What did you paint?")

    assert content_hash(with_context, policy=POLICY, embedding_model="m") != content_hash(
        DOCUMENT, policy=POLICY, embedding_model="m"
    )
    assert chunks_of(with_context)[0].chunk_hash != chunks_of(DOCUMENT)[0].chunk_hash
