"""A conditional write racing a delete by selection, on the in-memory store and on real PostgreSQL.

An `If-Match` write checks the stored version under its document's lock, embeds, then saves. A delete by
tag or of a whole project takes no document lock, so it could remove the document between that check and
the save: the write then put back, under a new version, a document it had only been allowed to replace,
and answered 201 (found by `scripts/probe_replica_consistency.py`). Whichever order the two take, the write
must not stand: before the delete, the delete removes it; after it, the version it expects is gone.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest

from app.domain.catalog import DocumentSelection
from app.domain.errors import VersionConflictError
from app.domain.models import Document
from app.engines.memory import InMemoryDocumentStore
from app.engines.postgres import PostgresDocumentStore
from app.ingestion.chunking import ChunkingPolicy
from app.ingestion.expected_versions import ANY_VERSION
from app.ingestion.pipeline import IngestionPipeline
from tests.contract.document_store import DIMENSIONS
from tests.unit.test_pipeline import GatedEmbedder as PipelineGatedEmbedder

if TYPE_CHECKING:
    from collections.abc import Sequence

    from app.domain.ports import DocumentStore


class GatedEmbedder(PipelineGatedEmbedder):
    """The pipeline test's gated embedder, of the contract's dimension (`waiting`: one is asked; `gate` lets it go)."""

    name = "gated"
    model_name = "gated-model"
    dimensions = DIMENSIONS


@pytest.fixture(params=["memory", pytest.param("postgres", marks=pytest.mark.integration)])
def store(request: pytest.FixtureRequest) -> DocumentStore:
    if request.param == "memory":
        return InMemoryDocumentStore()
    return PostgresDocumentStore(request.getfixturevalue("postgres_engine"))


POLICY = ChunkingPolicy(max_chars=1000, overlap_chars=0, min_chars=0)


def note(project: str, text: str, *, tags: tuple[str, ...] = ("red",)) -> Document:
    return Document(project_id=project, document_id="a", source="a.md", title="A", text=text, tags=tags)


SELECTIONS = {
    "by tag": lambda project: DocumentSelection(project_id=project, tag="red"),
    "the whole project": lambda project: DocumentSelection(project_id=project),
}


@pytest.mark.parametrize("selection", list(SELECTIONS))
@pytest.mark.parametrize("expected", ["the version read", "any version"])
async def test_an_if_match_write_does_not_bring_back_a_document_a_delete_removed_while_it_embedded(
    store: DocumentStore, unique_name: str, selection: str, expected: str
) -> None:
    embedder = GatedEmbedder()
    embedder.gate.set()
    pipeline = IngestionPipeline(store=store, embedder=embedder, policy=POLICY)
    [first] = await pipeline.ingest([note(unique_name, "The quartz key opens the archive.")])
    embedder.gate.clear()
    embedder.waiting.clear()
    version = first.version if expected == "the version read" else ANY_VERSION

    write = asyncio.create_task(
        pipeline.ingest([note(unique_name, "The copper key opens the cellar.")], expected_versions={"a": version})
    )
    await embedder.waiting.wait()  # checked the version under the document's lock; embedding now
    deleted = await store.delete_documents(SELECTIONS[selection](unique_name))
    embedder.gate.set()
    outcome = await asyncio.gather(write, return_exceptions=True)

    assert deleted == 1
    assert isinstance(outcome[0], VersionConflictError), outcome  # it was answered 201
    assert outcome[0].current_version is None
    assert await store.get_document(unique_name, "a") is None


@pytest.mark.parametrize("selection", list(SELECTIONS))
async def test_a_plain_write_racing_a_delete_by_selection_is_stored_after_it_and_answers_created(
    store: DocumentStore, unique_name: str, selection: str
) -> None:
    # Without an expectation the write is simply ordered after the delete: it creates the document again, and
    # says so (it answered "updated", of a document the delete had answered for before the write did).
    embedder = GatedEmbedder()
    embedder.gate.set()
    pipeline = IngestionPipeline(store=store, embedder=embedder, policy=POLICY)
    [first] = await pipeline.ingest([note(unique_name, "The quartz key opens the archive.")])
    embedder.gate.clear()
    embedder.waiting.clear()

    write = asyncio.create_task(pipeline.ingest([note(unique_name, "The copper key opens the cellar.")]))
    await embedder.waiting.wait()
    deleted = await store.delete_documents(SELECTIONS[selection](unique_name))
    embedder.gate.set()
    [outcome] = await write
    stored = await store.get_document(unique_name, "a")

    assert deleted == 1
    assert stored is not None
    assert [chunk.text for chunk in stored.chunks] == ["The copper key opens the cellar."]
    assert outcome.status == "created"
    assert outcome.version == stored.version > first.version  # an If-Match of the deleted one never names it


async def test_an_if_match_delete_racing_a_delete_by_tag_is_a_conflict_not_a_missing_document(
    store: DocumentStore, unique_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The delete by tag took the document first, so the version the If-Match named was gone: a 409, as when
    # the delete by tag ends before the If-Match delete begins (it answered 404, "no document").
    embedder = GatedEmbedder()
    embedder.gate.set()
    pipeline = IngestionPipeline(store=store, embedder=embedder, policy=POLICY)
    [written] = await pipeline.ingest([note(unique_name, "The quartz key opens the archive.")])
    read_states = store.document_states
    deleted: list[int] = []

    async def states_then_a_delete_by_tag(keys: Sequence[tuple[str, str]]) -> object:
        states = await read_states(keys)  # the If-Match delete's check reads these ...
        deleted.append(await store.delete_documents(SELECTIONS["by tag"](unique_name)))  # ... then this runs
        return states

    monkeypatch.setattr(store, "document_states", states_then_a_delete_by_tag)
    with pytest.raises(VersionConflictError) as refused:
        await pipeline.delete(unique_name, "a", expected_version=written.version)

    assert deleted == [1]
    assert refused.value.current_version is None
