"""A document's optional `context` is embedded with its chunks but never becomes their text."""

from __future__ import annotations

from dataclasses import replace

from app.domain.models import Document
from app.ingestion.chunking import ChunkingPolicy
from app.ingestion.content_hashes import content_hash, embedding_text
from app.ingestion.pipeline import IngestionPipeline

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


# Pinned: stored documents without a context must keep their hashes across upgrades, or every one of
# them would be embedded again on its next ingest.
DOCUMENT_HASH_WITHOUT_CONTEXT = "aaf7adaff53bf9c26f6c8cad4f5f05caa9c46c2f8df59ffd92018c445e66d2bb"
CHUNK_HASH_WITHOUT_CONTEXT = "67c543c41455689be9cfe90f580ce33aedfed9d37f3bdfda2dcef2bf99818b28"


def test_without_context_the_embedded_text_and_hashes_are_unchanged() -> None:
    [chunk] = chunks_of(DOCUMENT)

    assert embedding_text(chunk) == "Caroline\nYes, a sunrise."
    assert content_hash(DOCUMENT, policy=POLICY, embedding_model="m") == DOCUMENT_HASH_WITHOUT_CONTEXT
    assert chunk.chunk_hash == CHUNK_HASH_WITHOUT_CONTEXT


def test_changing_the_context_changes_the_hashes() -> None:
    with_context = replace(DOCUMENT, context="Melanie: What did you paint?")

    assert content_hash(with_context, policy=POLICY, embedding_model="m") != content_hash(
        DOCUMENT, policy=POLICY, embedding_model="m"
    )
    assert chunks_of(with_context)[0].chunk_hash != chunks_of(DOCUMENT)[0].chunk_hash
