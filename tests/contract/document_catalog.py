"""`DocumentCatalogContract`: listing, export, delete by selection and project stats of every `DocumentStore`.

A mixin like `DocumentStoreContract` (no Test prefix); the test classes of `test_document_stores.py` run both.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from app.domain.catalog import DocumentSelection
from tests.contract.document_store import CREATED, chunk, claimed, document, embedded, entry


def tagged(project: str, document_id: str, *, source: str, tags: tuple[str, ...], day: int, n_chunks: int = 1):
    chunks = [chunk(project, document_id, position, source=source) for position in range(n_chunks)]
    stored = replace(
        document(project, document_id, chunks, source=source),
        tags=tags,
        event_time=datetime(2026, 3, day, tzinfo=UTC),
        updated_at=datetime(2026, 3, day, 12, tzinfo=UTC),
    )
    return stored, embedded(chunks)


class DocumentCatalogContract:
    async def _three(self, store, project) -> None:
        await store.save_documents(
            [
                tagged(project, "b", source="chat/s1", tags=("x",), day=2, n_chunks=2),
                tagged(project, "a", source="chat/s2", tags=("y",), day=1),
                tagged(project, "c/1", source="notes/n", tags=("x", "y"), day=3, n_chunks=3),
            ]
        )

    async def test_listing_pages_by_document_id_without_repeats(self, store, project) -> None:
        await self._three(store, project)
        everything = DocumentSelection(project_id=project)

        first = await store.list_documents(everything, after=None, limit=2)
        second = await store.list_documents(everything, after=first[-1].document_id, limit=2)

        assert [d.document_id for d in first] == ["a", "b"]
        assert [d.document_id for d in second] == ["c/1"]
        assert [d.chunk_count for d in [*first, *second]] == [1, 2, 3]

    async def test_listed_summary_carries_what_a_listing_shows(self, store, project) -> None:
        versions = await store.save_documents([tagged(project, "a", source="chat/s2", tags=("y",), day=1)])

        [summary] = await store.list_documents(DocumentSelection(project_id=project), after=None, limit=10)

        assert (summary.source, summary.title, summary.tags) == ("chat/s2", "A guide", ("y",))
        assert summary.version == versions[project, "a"]
        assert summary.event_time == datetime(2026, 3, 1, tzinfo=UTC)
        assert summary.created_at == CREATED
        assert summary.updated_at == datetime(2026, 3, 1, 12, tzinfo=UTC)
        assert summary.lexically_indexed is False

    async def test_listing_filters_by_source_prefix_tag_time_and_update(self, store, project) -> None:
        await self._three(store, project)

        async def ids(**conditions) -> list[str]:
            selection = DocumentSelection(project_id=project, **conditions)
            return [d.document_id for d in await store.list_documents(selection, after=None, limit=10)]

        assert await ids(source_prefix="chat/") == ["a", "b"]
        assert await ids(tag="x") == ["b", "c/1"]
        assert await ids(tag="X") == ["b", "c/1"]  # case aside, as search filters
        assert await ids(event_time_from=datetime(2026, 3, 2, tzinfo=UTC)) == ["b", "c/1"]
        assert await ids(event_time_to=datetime(2026, 3, 2, tzinfo=UTC)) == ["a"]
        assert await ids(updated_since=datetime(2026, 3, 3, tzinfo=UTC)) == ["c/1"]
        assert await ids(source_prefix="chat/", tag="x") == ["b"]

    async def test_source_prefix_matches_wildcards_literally(self, store, project) -> None:
        await store.save_documents(
            [tagged(project, "p", source="a_b/1", tags=(), day=1), tagged(project, "q", source="axb/1", tags=(), day=1)]
        )

        listed = await store.list_documents(
            DocumentSelection(project_id=project, source_prefix="a_b"), after=None, limit=10
        )

        assert [d.document_id for d in listed] == ["p"]

    async def test_unknown_project_lists_nothing_and_counts_zero(self, store, project) -> None:
        stats = await store.project_stats(project + "_none")

        assert await store.list_documents(DocumentSelection(project_id=project + "_none"), after=None, limit=10) == []
        assert (stats.documents, stats.chunks, stats.lexically_indexed, stats.pending) == (0, 0, 0, 0)
        assert stats.oldest_pending_age_s == 0.0
        assert stats.last_write_at is None

    async def test_stats_count_documents_chunks_and_the_backlog(self, store, project) -> None:
        await self._three(store, project)
        before = await store.project_stats(project)
        await store.complete_outbox(await claimed(store, project))

        after = await store.project_stats(project)

        assert (before.documents, before.chunks, before.lexically_indexed, before.pending) == (3, 6, 0, 3)
        assert before.oldest_pending_age_s >= 0.0
        assert before.last_write_at == datetime(2026, 3, 3, 12, tzinfo=UTC)
        assert (after.lexically_indexed, after.pending, after.oldest_pending_age_s) == (6, 0, 0.0)

    async def test_delete_by_selection_removes_only_the_selected_and_queues_their_deletes(self, store, project) -> None:
        await self._three(store, project)
        await store.complete_outbox(await claimed(store, project))
        generation = await store.project_generation(project)

        deleted = await store.delete_documents(DocumentSelection(project_id=project, source_prefix="chat/"))

        assert deleted == 2
        assert await store.get_document(project, "a") is None
        assert await store.get_document(project, "c/1") is not None
        assert sorted((d.document_id, d.chunks) for d in await claimed(store, project)) == [("a", ()), ("b", ())]
        assert await store.project_generation(project) > generation

    async def test_deleting_the_whole_project_leaves_other_projects(self, store, project) -> None:
        await self._three(store, project)
        await store.save_documents([entry(project + "_other", "a", 1)])

        deleted = await store.delete_documents(DocumentSelection(project_id=project))

        assert deleted == 3
        assert (await store.project_stats(project)).documents == 0
        assert (await store.project_stats(project + "_other")).documents == 1

    async def test_deleting_nothing_keeps_the_generation(self, store, project) -> None:
        await store.save_documents([entry(project, "a", 1)])
        generation = await store.project_generation(project)

        deleted = await store.delete_documents(DocumentSelection(project_id=project, tag="absent"))

        assert deleted == 0
        assert await store.project_generation(project) == generation

    async def test_exported_documents_write_back_identically(self, store, project) -> None:
        await self._three(store, project)

        async with store.project_snapshot(project) as snapshot:
            exported = await snapshot.embedded_documents(project, after=None, limit=2)
            rest = await snapshot.embedded_documents(project, after=exported[-1][0].document_id, limit=2)
        await store.delete_documents(DocumentSelection(project_id=project))
        await store.save_documents([*exported, *rest])

        async with store.project_snapshot(project) as snapshot:
            again = await snapshot.embedded_documents(project, after=None, limit=10)
        assert [d.document_id for d, _ in exported + rest] == ["a", "b", "c/1"]
        assert [(d.document_id, d.chunks, d.created_at) for d, _ in again] == [
            (d.document_id, d.chunks, d.created_at) for d, _ in exported + rest
        ]
        assert [[list(e.embedding) for e in chunks] for _, chunks in again] == [
            [list(e.embedding) for e in chunks] for _, chunks in exported + rest
        ]
        assert {e.embedding_model for _, chunks in again for e in chunks} == {"test-model"}
