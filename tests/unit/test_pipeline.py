from __future__ import annotations

import asyncio
import contextlib
import hashlib
import unicodedata
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pytest

from app.domain.document_versions import DocumentState, SavedVersions
from app.domain.errors import DocumentTooLargeError, EngineUnavailableError, InvalidInputError, VersionConflictError
from app.domain.models import Document, DocumentChunks, EmbeddedChunk, StoredDocument
from app.engines.memory import InMemoryDocumentStore
from app.ingestion import pipeline as pipeline_module
from app.ingestion.chunking import ChunkingPolicy
from app.ingestion.content_hashes import chunk_hash, content_hash, embedding_text
from app.ingestion.pipeline import IngestionPipeline, IngestOutcome

if TYPE_CHECKING:
    from collections.abc import Sequence

POLICY = ChunkingPolicy(max_chars=200, overlap_chars=0, min_chars=0)


class CountingEmbedder:
    """Deterministic 4-d vectors from the text's hash; records every call."""

    name = "counting"
    model_name = "fake-model"
    dimensions = 4

    def __init__(self, *, fail: bool = False) -> None:
        self.calls: list[list[str]] = []
        self.fail = fail

    @property
    def embedded_texts(self) -> list[str]:
        return [text for call in self.calls for text in call]

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        if self.fail:
            raise EngineUnavailableError("model gone", engine=self.name)
        self.calls.append(list(texts))
        return [self._vector(text) for text in texts]

    async def embed_query(self, text: str, *, scope: str = "") -> list[float]:
        return self._vector(text)

    def _vector(self, text: str) -> list[float]:
        digest = hashlib.sha256(text.encode()).digest()
        return [digest[i % len(digest)] / 255 for i in range(self.dimensions)]


class FakeStore:
    """Just enough of DocumentStore for the write path: documents, embeddings by hash, writes."""

    name = "fake-store"

    def __init__(self) -> None:
        self.documents: dict[tuple[str, str], StoredDocument] = {}
        self.embeddings: dict[tuple[str, str, str], list[float]] = {}  # (project, model, chunk hash) -> vector
        self.save_calls: list[list[str]] = []
        self.replacing_calls: list[dict[tuple[str, str], int]] = []
        self.deleted: list[tuple[str, str]] = []

    async def document_states(self, keys):
        return {
            key: DocumentState(content_hash=stored.content_hash, version=stored.version, lexically_indexed=True)
            for key in keys
            if (stored := self.documents.get(key)) is not None
        }

    def lock_documents(self, keys):
        return contextlib.nullcontext()

    async def cached_embeddings(
        self, project_id: str, chunk_hashes: Sequence[str], *, model: str
    ) -> dict[str, list[float]]:
        return {h: vector for h in chunk_hashes if (vector := self.embeddings.get((project_id, model, h))) is not None}

    async def save_documents(
        self, documents: Sequence[tuple[StoredDocument, Sequence[EmbeddedChunk]]], *, replacing=None
    ):
        self.save_calls.append([stored.document_id for stored, _ in documents])
        self.replacing_calls.append(dict(replacing or {}))
        versions = {}
        created = {(stored.project_id, stored.document_id) for stored, _ in documents} - self.documents.keys()
        for stored, embedded in documents:
            assert [e.chunk for e in embedded] == list(stored.chunks)
            key = (stored.project_id, stored.document_id)
            versions[key] = len(self.save_calls)
            self.documents[key] = replace(stored, version=versions[key])
            for item in embedded:
                key = (stored.project_id, item.embedding_model, item.chunk.chunk_hash)
                self.embeddings[key] = list(item.embedding)
        return SavedVersions(versions, frozenset(created))

    async def delete_document(self, project_id: str, document_id: str) -> bool:
        self.deleted.append((project_id, document_id))
        return self.documents.pop((project_id, document_id), None) is not None

    async def get_document(self, project_id: str, document_id: str) -> StoredDocument | None:
        return self.documents.get((project_id, document_id))

    async def claim_outbox(self, *, limit: int) -> list[DocumentChunks]:
        return []

    async def complete_outbox(self, documents: Sequence[DocumentChunks]) -> None:
        return None

    async def outbox_backlog(self) -> int:
        return 0

    async def queue_project_for_reindex(self, project_id: str) -> int:
        return 0

    async def ping(self) -> None:
        return None


def doc(document_id: str, text: str, *, title: str = "Title", project_id: str = "p", **changes: Any) -> Document:
    document = Document(
        project_id=project_id, document_id=document_id, source=f"{document_id}.md", title=title, text=text
    )
    return replace(document, **changes) if changes else document


@pytest.fixture
def store() -> FakeStore:
    return FakeStore()


@pytest.fixture
def embedder() -> CountingEmbedder:
    return CountingEmbedder()


def pipeline(store: FakeStore, embedder: CountingEmbedder, **kwargs) -> IngestionPipeline:
    return IngestionPipeline(store=store, embedder=embedder, policy=POLICY, **kwargs)


async def test_new_documents_are_created_with_ids_hashes_and_embeddings(store, embedder) -> None:
    ingestion = pipeline(store, embedder)

    outcomes = await ingestion.ingest([doc("a", "# One\nFirst.\n# Two\nSecond.")])

    assert outcomes == [
        IngestOutcome(
            document_id="a", status="created", chunk_count=2, embedded_count=2, version=1, lexically_indexed=False
        )
    ]
    stored = store.documents[("p", "a")]
    assert [c.chunk_id for c in stored.chunks] == ["a#0", "a#1"]
    assert stored.chunks[0].text == "First."
    assert stored.chunks[0].chunk_hash == hashlib.sha256(b"Title > One\nFirst.").hexdigest()
    assert stored.lexically_indexed is False
    assert embedder.embedded_texts == ["Title > One\nFirst.", "Title > Two\nSecond."]


async def test_unchanged_document_writes_nothing_and_embeds_nothing(store, embedder) -> None:
    ingestion = pipeline(store, embedder)
    await ingestion.ingest([doc("a", "Some text.")])
    embedder.calls.clear()

    outcomes = await ingestion.ingest([doc("a", "Some text.")])

    assert outcomes == [
        IngestOutcome(
            document_id="a", status="unchanged", chunk_count=1, embedded_count=0, version=1, lexically_indexed=True
        )
    ]  # kept
    assert embedder.calls == []
    assert len(store.save_calls) == 1


async def test_updated_document_re_embeds_only_changed_chunk_text(store, embedder) -> None:
    ingestion = pipeline(store, embedder)
    await ingestion.ingest([doc("a", "# One\nStays the same.\n# Two\nOld text.")])
    embedder.calls.clear()

    outcomes = await ingestion.ingest([doc("a", "# One\nStays the same.\n# Two\nNew text.")])

    assert outcomes == [
        IngestOutcome(
            document_id="a", status="updated", chunk_count=2, embedded_count=1, version=2, lexically_indexed=False
        )
    ]
    assert embedder.embedded_texts == ["Title > Two\nNew text."]
    assert [c.text for c in store.documents[("p", "a")].chunks] == ["Stays the same.", "New text."]


async def test_text_is_stored_precomposed_and_either_form_is_one_document(store, embedder) -> None:
    ingestion = pipeline(store, embedder)
    decomposed = unicodedata.normalize("NFD", "Zoë in Zürich")

    first = await ingestion.ingest([doc("a", decomposed, title=decomposed, tags=(decomposed,))])
    again = await ingestion.ingest([doc("a", "Zoë in Zürich", title="Zoë in Zürich", tags=("Zoë in Zürich",))])

    assert [outcome.status for outcome in (*first, *again)] == ["created", "unchanged"]
    stored = store.documents[("p", "a")]
    assert (stored.chunks[0].text, stored.chunks[0].breadcrumb, stored.chunks[0].tags) == (
        "Zoë in Zürich",
        ("Zoë in Zürich",),
        ("Zoë in Zürich",),
    )
    assert embedder.embedded_texts == ["Zoë in Zürich\nZoë in Zürich"]


async def test_metadata_change_rewrites_without_re_embedding(store, embedder) -> None:
    ingestion = pipeline(store, embedder)
    await ingestion.ingest([doc("a", "Body.")])
    embedder.calls.clear()

    outcomes = await ingestion.ingest([doc("a", "Body.", tags=("ops",))])

    assert outcomes[0].status == "updated"
    assert outcomes[0].embedded_count == 0
    assert store.documents[("p", "a")].chunks[0].tags == ("ops",)


async def test_identical_chunks_across_a_batch_are_embedded_once_in_one_call(store, embedder) -> None:
    ingestion = pipeline(store, embedder)

    outcomes = await ingestion.ingest([doc("a", "Same body."), doc("b", "Same body."), doc("c", "Other.")])

    assert [o.embedded_count for o in outcomes] == [1, 0, 1]
    assert embedder.calls == [["Title\nSame body.", "Title\nOther."]]
    assert store.save_calls == [["a", "b", "c"]]


async def test_embedding_batches_span_documents(store, embedder) -> None:
    ingestion = pipeline(store, embedder, embed_batch_size=2)

    await ingestion.ingest([doc(str(i), f"Body {i}.") for i in range(5)])

    assert [len(call) for call in embedder.calls] == [2, 2, 1]


async def test_a_different_model_does_not_reuse_cached_embeddings(store, embedder) -> None:
    await pipeline(store, embedder).ingest([doc("a", "Body.")])
    other = CountingEmbedder()
    other.model_name = "other-model"

    outcomes = await IngestionPipeline(store=store, embedder=other, policy=POLICY).ingest([doc("a", "Body.")])

    assert outcomes[0].status == "updated"
    assert other.embedded_texts == ["Title\nBody."]


async def test_an_embedding_is_reused_within_its_project_only(store, embedder) -> None:
    ingestion = pipeline(store, embedder)
    await ingestion.ingest([doc("a", "The alpha password is swordfish-42.", project_id="alpha")])

    same_project = await ingestion.ingest([doc("b", "The alpha password is swordfish-42.", project_id="alpha")])
    other_project = await ingestion.ingest([doc("c", "The alpha password is swordfish-42.", project_id="beta")])

    assert same_project[0].embedded_count == 0
    # Reused across projects, `embedded: 0` would tell beta that alpha stores that text.
    assert other_project[0].embedded_count == 1


async def test_mixed_batch_reports_each_status_in_input_order(store, embedder) -> None:
    ingestion = pipeline(store, embedder)
    await ingestion.ingest([doc("old", "Keep."), doc("changed", "Before.")])

    outcomes = await ingestion.ingest([doc("new", "Fresh."), doc("changed", "After."), doc("old", "Keep.")])

    assert [(o.document_id, o.status) for o in outcomes] == [
        ("new", "created"),
        ("changed", "updated"),
        ("old", "unchanged"),
    ]
    assert store.save_calls[-1] == ["new", "changed"]


async def test_on_written_is_called_once_per_written_project(store, embedder) -> None:
    written: list[str] = []
    ingestion = pipeline(store, embedder, on_written=written.append)

    await ingestion.ingest([doc("a", "A.", project_id="p2"), doc("b", "B.", project_id="p1"), doc("c", "C.")])
    await ingestion.ingest([doc("a", "A.", project_id="p2")])

    assert written == ["p", "p1", "p2"]


async def test_embedder_failure_writes_nothing(store) -> None:
    ingestion = pipeline(store, CountingEmbedder(fail=True))

    with pytest.raises(EngineUnavailableError):
        await ingestion.ingest([doc("a", "Body.")])

    assert store.documents == {}


async def test_event_times_just_inside_the_range_are_kept(store, embedder) -> None:
    earliest = datetime(1, 1, 1, 0, 0, 0, 1, tzinfo=UTC)
    latest = datetime(9999, 12, 31, 23, 59, 59, 999998, tzinfo=UTC)

    await pipeline(store, embedder).ingest([doc("a", "ok", event_time=earliest), doc("b", "ok", event_time=latest)])

    assert [store.documents[("p", key)].event_time for key in ("a", "b")] == [earliest, latest]


@pytest.mark.parametrize(
    ("document", "field"),
    [
        (doc("a", "  \n\t "), "text"),
        (doc("a", "bad\x00text"), "text"),
        (doc("a", "ok", title="t\x00"), "title"),
        (doc("a", "ok", metadata={"k": ["v\x00"]}), "metadata"),
        (doc("", "ok"), "document_id"),
        (doc("a", "ok", project_id="bad name"), "project_id"),
        (doc("a", "ok", project_id="p" * 65), "project_id"),
        (doc("a", "ok", event_time=datetime.min.replace(tzinfo=UTC)), "event_time"),
        (doc("a", "ok", event_time=datetime.max.replace(tzinfo=UTC)), "event_time"),
    ],
)
async def test_invalid_documents_are_rejected_before_any_write(store, embedder, document, field) -> None:
    with pytest.raises(InvalidInputError) as raised:
        await pipeline(store, embedder).ingest([doc("fine", "Fine."), document])

    assert raised.value.field == field
    assert store.save_calls == []
    assert embedder.calls == []


async def test_duplicate_ids_in_one_batch_are_rejected(store, embedder) -> None:
    with pytest.raises(InvalidInputError) as raised:
        await pipeline(store, embedder).ingest([doc("a", "One."), doc("a", "Two.")])

    assert raised.value.field == "document_id"


async def test_same_id_in_two_projects_is_not_a_duplicate(store, embedder) -> None:
    outcomes = await pipeline(store, embedder).ingest([doc("a", "One.", project_id="x"), doc("a", "One.")])

    assert [o.status for o in outcomes] == ["created", "created"]


async def test_front_matter_only_document_is_rejected(store, embedder) -> None:
    with pytest.raises(InvalidInputError) as raised:
        await pipeline(store, embedder).ingest([doc("a", "---\ntitle: x\n---\n")])

    assert raised.value.field == "text"


async def test_empty_batch_does_nothing(store, embedder) -> None:
    assert await pipeline(store, embedder).ingest([]) == []
    assert store.save_calls == []


async def test_delete_reports_existence_and_notifies(store, embedder) -> None:
    written: list[str] = []
    ingestion = pipeline(store, embedder, on_written=written.append)
    await ingestion.ingest([doc("a", "Body.")])
    written.clear()

    assert await ingestion.delete("p", "a") is True
    assert await ingestion.delete("p", "a") is False
    assert written == ["p"]


def test_content_hash_covers_policy_and_fields() -> None:
    base = doc("a", "Body.")
    reference = content_hash(base, policy=POLICY, embedding_model="m")

    variants = [
        content_hash(replace(base, title="Other"), policy=POLICY, embedding_model="m"),
        content_hash(replace(base, source="x.md"), policy=POLICY, embedding_model="m"),
        content_hash(replace(base, metadata={"k": 1}), policy=POLICY, embedding_model="m"),
        content_hash(base, policy=replace(POLICY, max_chars=300), embedding_model="m"),
        content_hash(base, policy=POLICY, embedding_model="m2"),
    ]

    assert content_hash(doc("a", "Body."), policy=POLICY, embedding_model="m") == reference
    assert reference not in variants
    assert len(set(variants)) == len(variants)


def test_embedding_text_puts_the_breadcrumb_first_and_hash_matches() -> None:
    chunk = IngestionPipeline(store=FakeStore(), embedder=CountingEmbedder(), policy=POLICY).chunk(
        doc("a", "# Sec\nBody.", title="Paper title")
    )[0]

    assert embedding_text(chunk) == "Paper title > Sec\nBody."
    assert chunk.chunk_hash == chunk_hash("Paper title > Sec\nBody.")


async def test_an_expected_version_that_differs_refuses_the_write() -> None:
    store, embedder = FakeStore(), CountingEmbedder()
    ingestion = pipeline(store, embedder)
    [created] = await ingestion.ingest([doc("a", "First text.")])

    with pytest.raises(VersionConflictError) as refused:
        await ingestion.ingest([doc("a", "Second text.")], expected_versions={"a": created.version + 1})
    [updated] = await ingestion.ingest([doc("a", "Second text.")], expected_versions={"a": created.version})

    assert refused.value.current_version == created.version
    assert updated.status == "updated"
    assert updated.version > created.version


async def test_expected_version_zero_means_create_only() -> None:
    store, embedder = FakeStore(), CountingEmbedder()
    ingestion = pipeline(store, embedder)

    [created] = await ingestion.ingest([doc("a", "First text.")], expected_versions={"a": 0})

    with pytest.raises(VersionConflictError):
        await ingestion.ingest([doc("a", "Other text.")], expected_versions={"a": 0})
    assert created.status == "created"


async def test_a_conditional_write_has_the_store_check_again_the_versions_it_read(store, embedder) -> None:
    # A delete by selection takes no document lock: the save must find each conditional document as it was read.
    ingestion = pipeline(store, embedder)
    [first] = await ingestion.ingest([doc("a", "First.")])

    await ingestion.ingest(
        [doc("a", "Second."), doc("b", "New."), doc("c", "Plain.")], expected_versions={"a": first.version, "b": 0}
    )

    assert store.replacing_calls == [{}, {("p", "a"): first.version, ("p", "b"): 0}]


class GatedEmbedder(CountingEmbedder):
    """Embeds only after `gate` opens: an ingest holds its documents' lock meanwhile."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.waiting = asyncio.Event()

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.waiting.set()
        await self.gate.wait()
        return await super().embed_documents(texts)


async def test_a_delete_asked_during_an_earlier_ingest_runs_after_it_and_wins() -> None:
    store, embedder = InMemoryDocumentStore(), GatedEmbedder()
    ingestion = pipeline(store, embedder)
    slow_ingest = asyncio.create_task(ingestion.ingest([doc("a", "Written first.")]))
    await embedder.waiting.wait()  # the ingest holds the document, mid-embedding

    delete = asyncio.create_task(ingestion.delete("p", "a"))
    await asyncio.sleep(0.05)
    deleted_before_the_ingest_finished = delete.done()
    embedder.gate.set()
    [outcome] = await slow_ingest

    assert deleted_before_the_ingest_finished is False
    assert outcome.status == "created"
    assert await delete is True  # it found the ingest's document ...
    assert await store.get_document("p", "a") is None  # ... and the late-finishing ingest did not undo it


async def test_two_writes_of_one_document_apply_in_the_order_they_asked() -> None:
    store, embedder = InMemoryDocumentStore(), GatedEmbedder()
    ingestion = pipeline(store, embedder)
    first = asyncio.create_task(ingestion.ingest([doc("a", "First version.")]))
    await embedder.waiting.wait()

    second = asyncio.create_task(ingestion.ingest([doc("a", "Second version.")]))
    await asyncio.sleep(0.05)
    embedder.gate.set()
    [first_outcome], [second_outcome] = await first, await second

    stored = await store.get_document("p", "a")
    assert stored is not None
    assert [chunk.text for chunk in stored.chunks] == ["Second version."]
    assert first_outcome.version < second_outcome.version == stored.version


async def test_a_request_of_more_chunks_than_its_cap_is_refused_before_anything_is_embedded(
    store, embedder, monkeypatch
) -> None:
    # 46,000 chunks of one 64 MiB request held ~1.2 GiB of vectors and rows until the write (a pod past 2 GiB).
    monkeypatch.setattr(pipeline_module, "MAX_CHUNKS_PER_REQUEST", 3)
    documents = [doc(f"d{n}", f"# Part {n}\n\nBody {n}.\n\n## Sub {n}\n\nMore {n}.") for n in range(2)]

    with pytest.raises(DocumentTooLargeError, match="split into 4 chunks; at most 3 in one request") as refused:
        await pipeline(store, embedder).ingest(documents)

    assert refused.value.field == "documents"
    assert embedder.calls == []
    assert store.save_calls == []


async def test_concurrent_requests_embed_no_more_chunks_at_once_than_the_request_cap(store, monkeypatch) -> None:
    # Each request held its vectors until its write, and requests embedded side by side: four writers of 46,000
    # chunks each held ~5 GiB at once. Now the chunks being embedded and written are at most the cap in all.
    monkeypatch.setattr(pipeline_module, "MAX_CHUNKS_PER_REQUEST", 2)
    events: list[str] = []

    class YieldingEmbedder(CountingEmbedder):
        async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
            for _ in range(3):  # lets the other request's batch in, if anything allows it
                await asyncio.sleep(0)
            events.extend(f"embed {text.split()[-1]}" for text in texts)
            return await super().embed_documents(texts)

    original_save = store.save_documents

    async def save_documents(documents, **options):
        events.extend(f"save {stored.document_id}" for stored, _ in documents)
        return await original_save(documents, **options)

    store.save_documents = save_documents
    ingests = pipeline(store, YieldingEmbedder(), embed_batch_size=1)
    documents = [doc(f"d{n}", f"# Part\n\nBody {n}a.\n\n## Sub\n\nMore {n}b.") for n in range(2)]

    await asyncio.gather(*(ingests.ingest([document]) for document in documents))

    first, second = ("0", "1") if events[0].endswith("0a.") else ("1", "0")
    assert events == [
        f"embed {first}a.",
        f"embed {first}b.",
        f"save d{first}",
        f"embed {second}a.",
        f"embed {second}b.",
        f"save d{second}",
    ]


async def test_a_document_of_more_chunks_than_the_cap_is_refused_before_anything_is_embedded(
    store, embedder, monkeypatch
) -> None:
    monkeypatch.setattr(pipeline_module, "MAX_CHUNKS_PER_DOCUMENT", 3)
    # Sections under alternating heading levels never merge: each is a chunk of its own.
    text = "".join(f"# Part {n}\n\nBody {n}.\n\n## Sub {n}\n\nMore {n}.\n\n" for n in range(2))

    with pytest.raises(DocumentTooLargeError, match="splits into 4 chunks; at most 3"):
        await pipeline(store, embedder).ingest([doc("many", text)])

    assert embedder.calls == []
    assert store.save_calls == []
