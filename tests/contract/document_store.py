"""`DocumentStoreContract`: what every `DocumentStore` must do, run against each adapter (no Test prefix).

Also the builders both contract suites use to make documents and chunks by hand.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest

from app.domain.models import Chunk, EmbeddedChunk, Filters, StoredDocument

if TYPE_CHECKING:
    from collections.abc import Sequence

    from app.domain.models import DocumentChunks
    from app.domain.ports import DocumentStore

DIMENSIONS = 384
MODEL = "test-model"
CREATED = datetime(2026, 1, 5, 9, 30, tzinfo=UTC)


def embedding(*values: float) -> list[float]:
    """A 384-d vector from a few leading values (the rest zeros), so cosines are easy to compute by hand."""
    return [*values, *([0.0] * (DIMENSIONS - len(values)))]


def chunk(
    project_id: str,
    document_id: str,
    position: int,
    *,
    text: str | None = None,
    source: str = "runbooks/db.md",
    level: str = "section",
    tags: tuple[str, ...] = (),
    event_time: datetime | None = None,
) -> Chunk:
    body = text or f"text of {document_id} part {position}"
    return Chunk(
        chunk_id=f"{document_id}#{position}",
        document_id=document_id,
        project_id=project_id,
        text=body,
        source=source,
        level=level,
        breadcrumb=("Guide", f"Part {position}"),
        section_title=f"Part {position}",
        position=position,
        tags=tags,
        event_time=event_time,
        chunk_hash=f"hash:{body}",
    )


def document(
    project_id: str,
    document_id: str,
    chunks: Sequence[Chunk] = (),
    *,
    content_hash: str = "content-1",
    title: str = "A guide",
    source: str = "runbooks/db.md",
) -> StoredDocument:
    return StoredDocument(
        project_id=project_id,
        document_id=document_id,
        source=source,
        title=title,
        content_hash=content_hash,
        tags=("ops",),
        event_time=CREATED,
        metadata={"author": "ana", "pages": 3},
        chunks=tuple(chunks),
        lexically_indexed=False,
        created_at=CREATED,
        updated_at=CREATED,
    )


def embedded(chunks: Sequence[Chunk], *, model: str = MODEL) -> list[EmbeddedChunk]:
    """Each chunk with a distinct direction: chunk i points along axis i (by position)."""
    return [EmbeddedChunk(c, embedding(*([0.0] * c.position), 1.0), model) for c in chunks]


def entry(
    project_id: str, document_id: str, n_chunks: int, **kwargs: str
) -> tuple[StoredDocument, list[EmbeddedChunk]]:
    chunks = [chunk(project_id, document_id, position) for position in range(n_chunks)]
    return document(project_id, document_id, chunks, **kwargs), embedded(chunks)


async def claimed(store: DocumentStore, project_id: str) -> list[DocumentChunks]:
    """This project's outbox entries (a shared database holds other tests' entries too)."""
    return [item for item in await store.claim_outbox(limit=100_000) if item.project_id == project_id]


class DocumentStoreContract:
    @pytest.fixture
    def store(self) -> DocumentStore:
        raise NotImplementedError

    @pytest.fixture
    def project(self, unique_name: str) -> str:
        return unique_name

    async def test_saved_document_reads_back_with_chunks_in_position_order(self, store, project) -> None:
        chunks = [chunk(project, "doc", 2), chunk(project, "doc", 0), chunk(project, "doc", 1)]

        await store.save_documents([(document(project, "doc", chunks), embedded(chunks))])
        stored = await store.get_document(project, "doc")

        assert stored is not None
        assert (stored.title, stored.source, stored.content_hash) == ("A guide", "runbooks/db.md", "content-1")
        assert stored.tags == ("ops",)
        assert stored.event_time == CREATED
        assert dict(stored.metadata) == {"author": "ana", "pages": 3}
        assert stored.created_at == CREATED
        assert [c.chunk_id for c in stored.chunks] == ["doc#0", "doc#1", "doc#2"]
        assert stored.chunks[1] == chunks[2]
        assert stored.lexically_indexed is False

    async def test_missing_document_is_none(self, store, project) -> None:
        assert await store.get_document(project, "nope") is None
        assert await store.document_states([(project, "nope")]) == {}

    async def test_state_of_saved_document_is_its_hash_and_version(self, store, project) -> None:
        versions = await store.save_documents([entry(project, "doc", 1, content_hash="abc")])

        states = await store.document_states([(project, "doc"), (project, "nope")])

        assert set(states) == {(project, "doc")}
        assert states[project, "doc"].content_hash == "abc"
        assert states[project, "doc"].version == versions[project, "doc"]
        assert states[project, "doc"].lexically_indexed is False  # until the outbox has it, as get_document says

    async def test_versions_grow_with_every_write_and_across_a_delete(self, store, project) -> None:
        first = (await store.save_documents([entry(project, "doc", 1)]))[project, "doc"]
        second = (await store.save_documents([entry(project, "doc", 2, content_hash="content-2")]))[project, "doc"]
        await store.delete_document(project, "doc")
        third = (await store.save_documents([entry(project, "doc", 1)]))[project, "doc"]

        stored = await store.get_document(project, "doc")

        assert first < second < third
        assert stored is not None
        assert stored.version == third

    async def test_a_save_names_the_documents_it_created(self, store, project) -> None:
        # A document deleted since the writer read it is created again: the write must not say "updated".
        await store.save_documents([entry(project, "kept", 1), entry(project, "gone", 1)])
        await store.delete_document(project, "gone")

        saved = await store.save_documents(
            [entry(project, "kept", 2, content_hash="content-2"), entry(project, "gone", 1), entry(project, "new", 1)]
        )

        assert saved.created == {(project, "gone"), (project, "new")}
        assert set(saved) == {(project, "kept"), (project, "gone"), (project, "new")}

    async def test_versions_count_the_writes_of_their_own_project_only(self, store, project) -> None:
        # A version drawn from one sequence for every project told a tenant how many documents all the
        # others wrote between two of its own writes.
        other = f"{project}-other"
        first = (await store.save_documents([entry(project, "a", 1)]))[project, "a"]
        await store.save_documents([entry(other, f"doc{n}", 1) for n in range(3)])
        await store.delete_document(other, "doc0")

        second = (await store.save_documents([entry(project, "b", 1)]))[project, "b"]

        assert second == first + 1

    async def test_a_saved_document_gets_at_least_the_version_it_carries(self, store, project) -> None:
        # An import carries each document's version from the installation it left: a version counted
        # from 1 again would one day name other content than the one a client read there (If-Match).
        stored, chunks = entry(project, "moved", 1)
        moved = (await store.save_documents([(replace(stored, version=40), chunks)]))[project, "moved"]
        fresh = (await store.save_documents([entry(project, "new", 1)]))[project, "new"]
        below = (await store.save_documents([(replace(stored, version=3, content_hash="content-2"), chunks)]))[
            project, "moved"
        ]

        assert moved == 40
        assert fresh > moved  # the project's later writes count on from there
        assert below > fresh  # a version below the stored one is no floor: versions only grow

    async def test_a_second_writer_of_a_document_waits_for_the_first(self, store, project) -> None:
        events: list[str] = []
        first_holds = asyncio.Event()

        async def writer(name: str, hold: asyncio.Event | None) -> None:
            async with store.lock_documents([(project, "doc")]):
                events.append(f"{name} in")
                if hold is not None:
                    first_holds.set()
                    await asyncio.sleep(0.2)
                events.append(f"{name} out")

        first = asyncio.create_task(writer("first", first_holds))
        await first_holds.wait()
        second = asyncio.create_task(writer("second", None))
        other = asyncio.create_task(self._other_document_writer(store, project, events))
        await asyncio.gather(first, second, other)

        assert events.index("first out") < events.index("second in")
        assert events.index("other in") < events.index("first out")  # another document is not held up

    @staticmethod
    async def _other_document_writer(store, project, events: list[str]) -> None:
        async with store.lock_documents([(project, "other")]):
            events.append("other in")

    async def test_outbox_stats_through_a_version_count_only_what_was_queued_by_then(self, store, project) -> None:
        await store.save_documents([entry(project, "a", 1)])
        through = (await store.outbox_stats()).newest_version
        await store.save_documents([entry(project, "b", 1)])

        everything, by_then = await store.outbox_stats(), await store.outbox_stats(through=through)

        assert everything.newest_version > through
        assert by_then.backlog == everything.backlog - 1  # "b" (a shared database holds other tests' entries)

    async def test_writes_and_deletes_move_the_project_generation_on(self, store, project) -> None:
        start = await store.project_generation(project)
        await store.save_documents([entry(project, "doc", 1)])
        after_save = await store.project_generation(project)
        await store.delete_document(project, "doc")
        after_delete = await store.project_generation(project)
        await store.complete_outbox(await claimed(store, project))
        after_index = await store.project_generation(project)

        assert start < after_save < after_delete < after_index
        assert await store.project_generation(project + "_untouched") == 0

    async def test_existing_chunks_names_only_what_the_project_holds_now(self, store, project) -> None:
        await store.save_documents([entry(project, "a", 2), entry(project, "b", 1)])
        await store.delete_document(project, "b")

        existing = await store.existing_chunks(project, ["a#0", "a#1", "b#0", "nope#0"])

        assert existing == {"a#0": "hash:text of a part 0", "a#1": "hash:text of a part 1"}
        assert await store.existing_chunks(project + "_x", ["a#0"]) == {}

    async def test_existing_chunks_under_filters_names_only_chunks_meeting_them_as_stored_now(
        self, store, project
    ) -> None:
        public = [chunk(project, "a", 0, tags=("Public",), source="public/a.md", level="L1", event_time=CREATED)]
        private = [chunk(project, "b", 0, tags=("private",), source="private/b.md")]
        await store.save_documents([(document(project, "a", public), embedded(public))])
        await store.save_documents([(document(project, "b", private), embedded(private))])
        asked = ["a#0", "b#0"]
        day_after = CREATED + timedelta(days=1)

        async def existing(**filters: object) -> set[str]:
            return set(await store.existing_chunks(project, asked, filters=Filters(project_id=project, **filters)))

        assert await existing() == {"a#0", "b#0"}
        assert await existing(tags=("public",)) == {"a#0"}
        assert await existing(source_prefix="private/") == {"b#0"}
        assert await existing(levels=("L1",)) == {"a#0"}
        assert await existing(event_time_from=day_after) == set()
        assert await existing(event_time_from=day_after, include_undated=True) == {"b#0"}
        assert await existing(event_time_to=day_after) == {"a#0"}
        # Its own chunk ids and excluded terms are not what it checks: the ids asked are, and the hash.
        assert await existing(chunk_ids=("b#0",), excluded_terms=("text",)) == {"a#0", "b#0"}

    async def test_document_titles_are_one_per_document_up_to_the_limit(self, store, project) -> None:
        await store.save_documents(
            [entry(project, "b", 1, title="Postgres"), entry(project, "a", 3, title="Kafka"), entry(project, "c", 2)]
        )
        await store.delete_document(project, "c")

        titles = await store.document_titles(project, limit=10)

        assert sorted(titles) == ["Kafka", "Postgres"]  # one per document, however many chunks
        # The first by id, on every replica alike (a project past the limit is sampled the same way everywhere).
        assert await store.document_titles(project, limit=1) == ["Kafka"]
        assert await store.document_titles(project, limit=0) == []
        assert await store.document_titles(project + "_x", limit=10) == []

    async def test_saving_the_same_document_twice_changes_nothing(self, store, project) -> None:
        await store.save_documents([entry(project, "doc", 3)])
        first = await store.get_document(project, "doc")

        await store.save_documents([entry(project, "doc", 3)])
        second = await store.get_document(project, "doc")

        assert first is not None
        assert second is not None
        assert second.chunks == first.chunks
        assert len(await claimed(store, project)) == 1

    async def test_changed_document_replaces_exactly_its_chunks(self, store, project) -> None:
        await store.save_documents([entry(project, "doc", 3), entry(project, "other", 2)])
        changed = [chunk(project, "doc", 0, text="rewritten intro")]

        await store.save_documents([(document(project, "doc", changed, content_hash="content-2"), embedded(changed))])

        doc = await store.get_document(project, "doc")
        other = await store.get_document(project, "other")
        assert doc is not None
        assert other is not None
        assert [c.text for c in doc.chunks] == ["rewritten intro"]
        assert doc.content_hash == "content-2"
        assert [c.chunk_id for c in other.chunks] == ["other#0", "other#1"]

    async def test_replaced_document_keeps_its_creation_time(self, store, project) -> None:
        await store.save_documents([entry(project, "doc", 1)])
        later = CREATED + timedelta(days=2)
        doc, chunks = entry(project, "doc", 1, content_hash="content-2")

        await store.save_documents([(_with_times(doc, later), chunks)])

        stored = await store.get_document(project, "doc")
        assert stored is not None
        assert (stored.created_at, stored.updated_at) == (CREATED, later)

    async def test_document_with_no_chunks_is_stored(self, store, project) -> None:
        await store.save_documents([entry(project, "empty", 0)])

        stored = await store.get_document(project, "empty")

        assert stored is not None
        assert stored.chunks == ()

    async def test_same_ids_in_two_projects_stay_apart(self, store, project) -> None:
        await store.save_documents([entry(project, "doc", 2), entry(project + "_b", "doc", 1, content_hash="b")])

        await store.delete_document(project + "_b", "doc")

        stored = await store.get_document(project, "doc")
        assert stored is not None
        assert len(stored.chunks) == 2
        assert await store.get_document(project + "_b", "doc") is None

    async def test_delete_removes_document_and_queues_lexical_delete(self, store, project) -> None:
        await store.save_documents([entry(project, "doc", 2)])

        deleted = await store.delete_document(project, "doc")

        assert deleted is True
        assert await store.get_document(project, "doc") is None
        assert [(d.document_id, d.chunks) for d in await claimed(store, project)] == [("doc", ())]

    async def test_deleting_a_missing_document_returns_false(self, store, project) -> None:
        assert await store.delete_document(project, "nope") is False
        assert await claimed(store, project) == []

    async def test_cached_embeddings_are_found_by_hash_and_model_in_their_project_only(self, store, project) -> None:
        chunks = [chunk(project, "doc", 0, text="alpha"), chunk(project, "doc", 1, text="beta")]
        await store.save_documents([(document(project, "doc", chunks), embedded(chunks))])

        cached = await store.cached_embeddings(project, ["hash:alpha", "hash:beta", "hash:unknown"], model=MODEL)
        other_model = await store.cached_embeddings(project, ["hash:alpha"], model="another-model")
        other_project = await store.cached_embeddings(f"{project}-other", ["hash:alpha", "hash:beta"], model=MODEL)

        assert set(cached) == {"hash:alpha", "hash:beta"}
        assert cached["hash:beta"] == pytest.approx(embedding(0.0, 1.0))
        assert other_model == {}
        assert other_project == {}  # another tenant must not learn that this project stores these texts
        assert await store.cached_embeddings(project, [], model=MODEL) == {}

    async def test_claimed_outbox_entry_carries_current_chunks_and_version(self, store, project) -> None:
        await store.save_documents([entry(project, "doc", 2)])

        [item] = await claimed(store, project)

        assert item.document_id == "doc"
        assert [c.chunk_id for c in item.chunks] == ["doc#0", "doc#1"]
        assert item.outbox_version is not None

    async def test_chunk_context_round_trips_through_reads_and_the_outbox(self, store, project) -> None:
        with_context = replace(chunk(project, "turn", 0), context="Mia: Did you plant apple trees?")
        changed = replace(with_context, context="Mia: Did you plant pear trees?")

        await store.save_documents([(document(project, "turn", [with_context]), embedded([with_context]))])
        stored = await store.get_document(project, "turn")
        [item] = await claimed(store, project)
        await store.save_documents([(document(project, "turn", [changed]), embedded([changed]))])
        restored = await store.get_document(project, "turn")

        assert stored is not None
        assert stored.chunks == (with_context,)
        assert item.chunks == (with_context,)
        assert restored is not None
        assert restored.chunks[0].context == "Mia: Did you plant pear trees?"

    async def test_claim_respects_limit(self, store, project) -> None:
        await store.save_documents([entry(project, "a", 1), entry(project, "b", 1)])

        assert len(await store.claim_outbox(limit=1)) == 1
        assert await store.claim_outbox(limit=0) == []

    async def test_a_claimed_entry_is_no_other_workers_until_released(self, store, project) -> None:
        await store.save_documents([entry(project, "a", 1), entry(project, "b", 1)])

        first = await claimed(store, project)
        second = await claimed(store, project)
        await store.release_outbox(first)
        third = await claimed(store, project)

        assert sorted(d.document_id for d in first) == ["a", "b"]
        assert second == []
        assert sorted(d.document_id for d in third) == ["a", "b"]

    async def test_a_new_version_of_a_claimed_entry_is_claimable_at_once(self, store, project) -> None:
        await store.save_documents([entry(project, "a", 1)])
        [old] = await claimed(store, project)

        await store.save_documents([entry(project, "a", 2, content_hash="content-2")])
        [new] = await claimed(store, project)

        assert new.outbox_version is not None
        assert old.outbox_version is not None
        assert new.outbox_version > old.outbox_version
        assert len(new.chunks) == 2

    async def test_concurrent_claimers_share_the_entries_without_overlap(self, store, project) -> None:
        await store.save_documents([entry(project, f"d{n}", 1) for n in range(40)])

        batches = await asyncio.gather(*(store.claim_outbox(limit=7) for _ in range(8)))

        ours = [d.document_id for batch in batches for d in batch if d.project_id == project]
        assert len(ours) == len(set(ours))
        assert set(ours) <= {f"d{n}" for n in range(40)}

    async def test_one_projects_backlog_does_not_hold_back_another_projects_entry(self, store, project) -> None:
        # A tenant writing thousands of documents must not delay another's write until its backlog is indexed.
        other = f"{project}-other"
        await store.save_documents([entry(project, f"d{n}", 1) for n in range(30)])
        await store.save_documents([entry(other, "late", 1)])

        batches: list[list[tuple[str, str]]] = []
        while batch := await store.claim_outbox(limit=5):
            batches.append(
                [(item.project_id, item.document_id) for item in batch if item.project_id in {project, other}]
            )
        [late_batch] = [number for number, claims in enumerate(batches) if (other, "late") in claims]
        ours_claimed_first = sum(len(claims) for claims in batches[:late_batch])

        assert ours_claimed_first <= 1, f"{ours_claimed_first} of the backlog claimed before the later write"
        assert [document_id for claims in batches for project_id, document_id in claims if project_id == project] == [
            f"d{n}" for n in range(30)
        ]

    async def test_outbox_stats_count_entries_and_age_the_oldest(self, store, project) -> None:
        await store.save_documents([entry(project, "a", 1)])

        stats = await store.outbox_stats()

        assert stats.backlog >= 1
        assert stats.oldest_age_s >= 0.0

    async def test_completed_entry_leaves_queue_and_marks_document_indexed(self, store, project) -> None:
        await store.save_documents([entry(project, "doc", 2)])
        backlog = (await store.outbox_stats()).backlog
        items = await claimed(store, project)

        await store.complete_outbox(items)

        stored = await store.get_document(project, "doc")
        assert stored is not None
        assert stored.lexically_indexed is True
        assert await claimed(store, project) == []
        assert (await store.outbox_stats()).backlog == backlog - 1

    async def test_entry_requeued_after_claim_stays_queued(self, store, project) -> None:
        await store.save_documents([entry(project, "doc", 2)])
        [stale] = await claimed(store, project)
        await store.save_documents([entry(project, "doc", 1, content_hash="content-2")])

        await store.complete_outbox([stale])

        [fresh] = await claimed(store, project)
        assert fresh.outbox_version is not None
        assert stale.outbox_version is not None
        assert fresh.outbox_version > stale.outbox_version
        assert [c.chunk_id for c in fresh.chunks] == ["doc#0"]
        stored = await store.get_document(project, "doc")
        assert stored is not None
        assert stored.lexically_indexed is False

    async def test_backlog_counts_queued_documents(self, store, project) -> None:
        before = (await store.outbox_stats()).backlog

        await store.save_documents([entry(project, "a", 1), entry(project, "b", 1)])
        await store.save_documents([entry(project, "a", 1)])

        assert (await store.outbox_stats()).backlog == before + 2

    async def test_reindex_queues_every_document_of_the_project_only(self, store, project) -> None:
        await store.save_documents([entry(project, "a", 1), entry(project, "b", 2), entry(project + "_x", "c", 1)])
        await store.complete_outbox(await claimed(store, project) + await claimed(store, project + "_x"))

        queued = await store.queue_project_for_reindex(project)

        assert queued == 2
        assert sorted(d.document_id for d in await claimed(store, project)) == ["a", "b"]
        assert await claimed(store, project + "_x") == []
        stored = await store.get_document(project, "b")
        assert stored is not None
        assert stored.lexically_indexed is False

    async def test_project_ids_lists_projects_that_hold_documents(self, store, project) -> None:
        await store.save_documents([entry(project, "a", 1), entry(project, "b", 1), entry(project + "_x", "c", 1)])
        await store.delete_document(project + "_x", "c")

        ids = await store.project_ids()

        assert ids.count(project) == 1
        assert project + "_x" not in ids
        assert ids == sorted(set(ids))

    async def test_project_ids_among_lists_only_those_projects(self, store, project) -> None:
        await store.save_documents(
            [entry(project, "a", 1), entry(project + "_y", "b", 1), entry(project + "_z", "c", 1)]
        )

        among = await store.project_ids(among={project + "_z", project, project + "_none"})

        assert among == [project, project + "_z"]
        assert await store.project_ids(among=set()) == []

    async def test_reindex_of_an_empty_project_queues_nothing(self, store, project) -> None:
        assert await store.queue_project_for_reindex(project) == 0

    async def test_ping_answers(self, store) -> None:
        await store.ping()


def _with_times(doc: StoredDocument, updated_at: datetime) -> StoredDocument:
    return replace(doc, created_at=updated_at, updated_at=updated_at)
