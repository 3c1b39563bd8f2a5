"""`VectorIndexContract`: what every `VectorIndex` must do, run against each adapter (no Test prefix).

An index searches what its document store saved, so each adapter supplies both fixtures.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest

from app.domain.models import EmbeddedChunk, Filters
from tests.contract.document_store import MODEL, chunk, document, embedding

if TYPE_CHECKING:
    from collections.abc import Sequence

    from app.domain.models import Chunk
    from app.domain.ports import DocumentStore, VectorIndex

JAN = datetime(2026, 1, 1, tzinfo=UTC)
FEB = datetime(2026, 2, 1, tzinfo=UTC)
MAR = datetime(2026, 3, 1, tzinfo=UTC)


async def save(store: DocumentStore, items: Sequence[tuple[Chunk, Sequence[float]]]) -> None:
    """Save chunks (grouped into their documents) with the given embeddings."""
    by_document: dict[tuple[str, str], list[EmbeddedChunk]] = {}
    for item, vector in items:
        by_document.setdefault((item.project_id, item.document_id), []).append(EmbeddedChunk(item, vector, MODEL))
    await store.save_documents(
        [
            (document(project, doc_id, [e.chunk for e in chunks]), chunks)
            for (project, doc_id), chunks in by_document.items()
        ]
    )


def ids(hits) -> list[str]:
    return [hit.chunk_id for hit in hits]


async def kept(index, project: str, *excluded_terms: str) -> list[str]:
    """The ids a search near `embedding(1.0)` keeps when it excludes `excluded_terms`."""
    filters = Filters(project_id=project, excluded_terms=excluded_terms)
    return ids(await index.search(embedding(1.0), top_k=10, filters=filters))


class VectorIndexContract:
    @pytest.fixture
    def store(self) -> DocumentStore:
        raise NotImplementedError

    @pytest.fixture
    def index(self, store) -> VectorIndex:
        raise NotImplementedError

    @pytest.fixture
    def project(self, unique_name: str) -> str:
        return unique_name

    async def test_nearest_chunk_ranks_first(self, store, index, project) -> None:
        await save(
            store, [(chunk(project, "far", 0), embedding(0.0, 1.0)), (chunk(project, "near", 0), embedding(1.0, 0.0))]
        )

        hits = await index.search(embedding(0.9, 0.1), top_k=2, filters=Filters(project_id=project))

        assert ids(hits) == ["near#0", "far#0"]

    async def test_score_is_cosine_similarity_best_first(self, store, index, project) -> None:
        await save(
            store,
            [
                (chunk(project, "same", 0), embedding(2.0, 0.0)),
                (chunk(project, "diagonal", 0), embedding(1.0, 1.0)),
                (chunk(project, "orthogonal", 0), embedding(0.0, 3.0)),
                (chunk(project, "opposite", 0), embedding(-1.0, 0.0)),
            ],
        )

        hits = await index.search(embedding(1.0, 0.0), top_k=4, filters=Filters(project_id=project))

        assert ids(hits) == ["same#0", "diagonal#0", "orthogonal#0", "opposite#0"]
        assert [h.score for h in hits] == pytest.approx([1.0, 2**-0.5, 0.0, -1.0], abs=1e-6)

    async def test_hit_carries_the_whole_chunk(self, store, index, project) -> None:
        original = chunk(project, "doc", 3, tags=("db", "ops"), event_time=FEB, level="paragraph")
        await save(store, [(original, embedding(1.0))])

        [hit] = await index.search(embedding(1.0), top_k=1, filters=Filters(project_id=project))

        assert hit.chunk == original

    async def test_top_k_limits_the_hits(self, store, index, project) -> None:
        await save(store, [(chunk(project, "doc", i), embedding(1.0, i / 10)) for i in range(5)])

        hits = await index.search(embedding(1.0), top_k=3, filters=Filters(project_id=project))

        assert ids(hits) == ["doc#0", "doc#1", "doc#2"]
        assert await index.search(embedding(1.0), top_k=0, filters=Filters(project_id=project)) == []

    async def test_other_projects_are_never_returned(self, store, index, project) -> None:
        await save(
            store,
            [(chunk(project, "mine", 0), embedding(0.0, 1.0)), (chunk(project + "_x", "theirs", 0), embedding(1.0))],
        )

        hits = await index.search(embedding(1.0), top_k=10, filters=Filters(project_id=project))

        assert ids(hits) == ["mine#0"]

    async def test_levels_filter(self, store, index, project) -> None:
        await save(
            store,
            [
                (chunk(project, "doc", 0, level="document"), embedding(1.0)),
                (chunk(project, "doc", 1, level="section"), embedding(1.0, 0.1)),
                (chunk(project, "doc", 2, level="paragraph"), embedding(1.0, 0.2)),
            ],
        )

        hits = await index.search(
            embedding(1.0), top_k=10, filters=Filters(project_id=project, levels=("section", "paragraph"))
        )

        assert ids(hits) == ["doc#1", "doc#2"]

    async def test_tags_filter_needs_every_tag(self, store, index, project) -> None:
        await save(
            store,
            [
                (chunk(project, "doc", 0, tags=("db",)), embedding(1.0)),
                (chunk(project, "doc", 1, tags=("db", "ops", "k8s")), embedding(1.0, 0.1)),
                (chunk(project, "doc", 2, tags=("ops",)), embedding(1.0, 0.2)),
            ],
        )

        hits = await index.search(embedding(1.0), top_k=10, filters=Filters(project_id=project, tags=("ops", "db")))

        assert ids(hits) == ["doc#1"]

    async def test_tags_filter_ignores_case_and_hits_keep_the_tags_as_written(self, store, index, project) -> None:
        await save(
            store,
            [
                (chunk(project, "doc", 0, tags=("Kubernetes", "SRE")), embedding(1.0)),
                (chunk(project, "doc", 1, tags=("kubernetes-legacy",)), embedding(1.0, 0.1)),
            ],
        )

        def tagged(*tags: str) -> Filters:
            return Filters(project_id=project, tags=tags)

        lower = await index.search(embedding(1.0), top_k=10, filters=tagged("kubernetes"))
        assert ids(lower) == ["doc#0"]
        assert lower[0].chunk.tags == ("Kubernetes", "SRE")
        assert ids(await index.search(embedding(1.0), top_k=10, filters=tagged("KUBERNETES", "sre"))) == ["doc#0"]
        assert ids(await index.search(embedding(1.0), top_k=10, filters=tagged("Kubernetes"))) == ["doc#0"]

    async def test_excluded_terms_leave_out_chunks_holding_them_in_text_title_source_or_tags(
        self, store, index, project
    ) -> None:
        await save(
            store,
            [
                (chunk(project, "text", 0, text="the consumer lags behind the brokers"), embedding(1.0)),
                (chunk(project, "plain", 0, text="replication is healthy again"), embedding(1.0, 0.1)),
                (chunk(project, "path", 0, source="runbooks/kafka.md"), embedding(1.0, 0.2)),
                (chunk(project, "tag", 0, tags=("kafka",)), embedding(1.0, 0.3)),
                (chunk(project, "split", 0, text="the lag of the consumer"), embedding(1.0, 0.4)),
            ],
        )

        def excluding(*terms: str) -> Filters:
            return Filters(project_id=project, excluded_terms=terms)

        assert ids(await index.search(embedding(1.0), top_k=10, filters=excluding("lag"))) == [
            "plain#0",
            "path#0",
            "tag#0",
        ]  # "lags" is "lag" stemmed, in both texts that hold it
        assert ids(await index.search(embedding(1.0), top_k=10, filters=excluding("kafka"))) == [
            "text#0",
            "plain#0",
            "split#0",
        ]
        assert "split#0" in ids(await index.search(embedding(1.0), top_k=10, filters=excluding("consumer lag")))
        assert ids(await index.search(embedding(1.0), top_k=10, filters=excluding("guide"))) == []  # the title

    @pytest.mark.parametrize("excluded_nearest", [1, 3, 9])
    async def test_excluded_terms_leave_the_nearest_others_however_many_of_the_nearest_they_take(
        self, store, index, project, excluded_nearest: int
    ) -> None:
        # The nearest `excluded_nearest` chunks say "kafka"; an exact search checks the nearest few first.
        await save(
            store,
            [
                (
                    chunk(project, f"d{rank:02}", 0, text="kafka lag" if rank < excluded_nearest else "healthy"),
                    embedding(1.0, rank / 10),
                )
                for rank in range(12)
            ],
        )

        hits = await index.search(
            embedding(1.0), top_k=2, filters=Filters(project_id=project, excluded_terms=("kafka",))
        )

        assert ids(hits) == [f"d{excluded_nearest:02}#0", f"d{excluded_nearest + 1:02}#0"]

    async def test_excluded_terms_ignore_accents_as_the_lexical_leg_does(self, store, index, project) -> None:
        await save(
            store,
            [
                (chunk(project, "accented", 0, text="Zoë moved the résumé screening to Zürich."), embedding(1.0)),
                (chunk(project, "plain", 0, text="Chloe keeps the cafe notes."), embedding(1.0, 0.1)),
                (chunk(project, "tagged", 0, tags=("Straße",)), embedding(1.0, 0.2)),
            ],
        )

        assert await kept(index, project, "zurich") == ["plain#0", "tagged#0"]
        assert await kept(index, project, "RESUME screening") == ["plain#0", "tagged#0"]
        assert await kept(index, project, "café") == ["accented#0", "tagged#0"]
        assert await kept(index, project, "strasse") == ["accented#0", "plain#0"]

    async def test_excluded_terms_read_text_as_the_lexical_leg_does_format_marks_dotted_i_final_sigma(
        self, store, index, project
    ) -> None:
        # The lexical engines read text in `analysis_form` (app.domain.text_forms): a zero-width joiner or a
        # bidi mark inside a word is not there, `İ` is `I`, a final sigma the other one.
        await save(
            store,
            [
                (
                    chunk(project, "joined", 0, text="The micro\u200dservice and Kubernetes\u200e notes."),
                    embedding(1.0),
                ),
                (chunk(project, "turkish", 0, text="Ferries leave İstanbul at dawn."), embedding(1.0, 0.1)),
                (chunk(project, "greek", 0, text="ΟΔΟΣ κλειστή."), embedding(1.0, 0.2)),
            ],
        )

        assert await kept(index, project, "microservice") == ["turkish#0", "greek#0"]
        assert await kept(index, project, "kubernetes") == ["turkish#0", "greek#0"]
        assert await kept(index, project, "istanbul") == ["joined#0", "greek#0"]
        assert await kept(index, project, "οδος") == ["joined#0", "turkish#0"]

    async def test_excluded_terms_ignore_arabic_and_hebrew_diacritics_and_greek_accents_as_the_lexical_leg_does(
        self, store, index, project
    ) -> None:
        await save(
            store,
            [
                (chunk(project, "arabic", 0, text="ذَهَبَ مُحَمَّدٌ إِلَى المَكْتَبَةِ"), embedding(1.0)),
                (chunk(project, "hebrew", 0, text="שָׁלוֹם לְכָל מִשְׁפָּחָה"), embedding(1.0, 0.1)),
                (chunk(project, "greek", 0, text="Συνάντηση στην Αθήνα"), embedding(1.0, 0.2)),
            ],
        )

        assert await kept(index, project, "محمد") == ["hebrew#0", "greek#0"]
        assert await kept(index, project, "שלום") == ["arabic#0", "greek#0"]
        assert await kept(index, project, "αθηνα") == ["arabic#0", "hebrew#0"]

    async def test_an_excluded_thai_word_excludes_the_chunk_saying_it_inside_a_run(self, store, index, project) -> None:
        await save(
            store,
            [
                (chunk(project, "fried-rice", 0, text="ฉันชอบกินข้าวผัดกับเพื่อน"), embedding(1.0)),
                (chunk(project, "rain", 0, text="วันนี้ฝนตกหนักมาก"), embedding(1.0, 0.1)),
            ],
        )

        assert await kept(index, project, "ข้าวผัด") == ["rain#0"]
        assert await kept(index, project, "ผัดข้าว") == ["fried-rice#0", "rain#0"]  # its letters in another order

    async def test_an_excluded_chinese_or_japanese_word_excludes_the_chunk_saying_it(
        self, store, index, project
    ) -> None:
        await save(
            store,
            [
                (chunk(project, "tokyo", 0, text="東京で会議がありました。"), embedding(1.0)),
                (chunk(project, "beijing", 0, text="北京的会议很长。"), embedding(1.0, 0.1)),
            ],
        )

        assert await kept(index, project, "東京") == ["beijing#0"]
        assert await kept(index, project, "京北") == [
            "tokyo#0",
            "beijing#0",
        ]  # a phrase: 京 and 北 are not adjacent in either

    async def test_source_prefix_filter_is_literal(self, store, index, project) -> None:
        await save(
            store,
            [
                (chunk(project, "a", 0, source="runbooks/db_1.md"), embedding(1.0)),
                (chunk(project, "b", 0, source="runbooks/dbx1.md"), embedding(1.0, 0.1)),
                (chunk(project, "c", 0, source="notes/runbooks/db_1.md"), embedding(1.0, 0.2)),
            ],
        )

        hits = await index.search(
            embedding(1.0), top_k=10, filters=Filters(project_id=project, source_prefix="runbooks/db_")
        )

        assert ids(hits) == ["a#0"]

    async def test_a_source_prefix_as_long_as_a_source_filters_exactly(self, store, index, project) -> None:
        long_source = "東京/" + "s" * 1021
        await save(
            store,
            [
                (chunk(project, "a", 0, source=long_source[:-1] + "a"), embedding(1.0)),
                (chunk(project, "s", 0, source=long_source), embedding(1.0, 0.1)),
            ],
        )

        hits = await index.search(
            embedding(1.0), top_k=10, filters=Filters(project_id=project, source_prefix=long_source)
        )

        assert ids(hits) == ["s#0"]

    async def test_event_time_range_includes_start_and_excludes_end(self, store, index, project) -> None:
        await save(
            store,
            [
                (chunk(project, "at_start", 0, event_time=JAN), embedding(1.0)),
                (chunk(project, "inside", 0, event_time=FEB), embedding(1.0, 0.1)),
                (chunk(project, "at_end", 0, event_time=MAR), embedding(1.0, 0.2)),
                (chunk(project, "undated", 0), embedding(1.0, 0.3)),
            ],
        )

        hits = await index.search(
            embedding(1.0), top_k=10, filters=Filters(project_id=project, event_time_from=JAN, event_time_to=MAR)
        )
        since_feb = await index.search(
            embedding(1.0), top_k=10, filters=Filters(project_id=project, event_time_from=FEB)
        )

        assert ids(hits) == ["at_start#0", "inside#0"]
        assert ids(since_feb) == ["inside#0", "at_end#0"]

    async def test_event_time_range_is_exact_to_the_microsecond(self, store, index, project) -> None:
        moment = datetime(2025, 3, 1, 12, 0, 0, 500, tzinfo=UTC)
        before_1970 = datetime(1969, 12, 31, 23, 59, 59, 999_500, tzinfo=UTC)
        await save(
            store,
            [
                (chunk(project, "moment", 0, event_time=moment), embedding(1.0)),
                (chunk(project, "before_1970", 0, event_time=before_1970), embedding(1.0, 0.1)),
            ],
        )
        one = timedelta(microseconds=1)

        for start, end, expected in [
            (moment, None, ["moment#0"]),
            (moment + one, None, []),
            (None, moment, ["before_1970#0"]),
            (None, moment + one, ["moment#0", "before_1970#0"]),
            (before_1970 + one, moment, []),
            (before_1970, before_1970 + one, ["before_1970#0"]),
            (before_1970 - one, before_1970, []),
        ]:
            filters = Filters(project_id=project, event_time_from=start, event_time_to=end)
            assert ids(await index.search(embedding(1.0), top_k=10, filters=filters)) == expected, (start, end)

    async def test_a_range_with_include_undated_keeps_undated_chunks_only(self, store, index, project) -> None:
        await save(
            store,
            [
                (chunk(project, "inside", 0, event_time=FEB), embedding(1.0)),
                (chunk(project, "before", 0, event_time=JAN), embedding(1.0, 0.1)),
                (chunk(project, "undated", 0), embedding(1.0, 0.2)),
            ],
        )
        window = Filters(project_id=project, event_time_from=FEB, event_time_to=MAR, include_undated=True)

        hits = await index.search(embedding(1.0), top_k=10, filters=window)

        assert ids(hits) == ["inside#0", "undated#0"]

    async def test_chunk_ids_restrict_and_rank_exactly(self, store, index, project) -> None:
        await save(store, [(chunk(project, "doc", i), embedding(1.0, i / 10)) for i in range(6)])

        hits = await index.search(
            embedding(1.0), top_k=2, filters=Filters(project_id=project, chunk_ids=("doc#5", "doc#3", "doc#4"))
        )

        assert ids(hits) == ["doc#3", "doc#4"]
        assert await index.search(embedding(1.0), top_k=5, filters=Filters(project_id=project, chunk_ids=())) == []

    async def test_selective_filter_still_fills_top_k(self, store, index, project) -> None:
        # Many near chunks without the tag, a few far ones with it: the far ones must all come back.
        near = [(chunk(project, f"n{i}", 0), embedding(1.0, i / 500)) for i in range(150)]
        far = [(chunk(project, f"f{i}", 0, tags=("rare",)), embedding(0.0, 1.0, i / 10)) for i in range(5)]
        await save(store, near + far)

        hits = await index.search(embedding(1.0), top_k=5, filters=Filters(project_id=project, tags=("rare",)))

        assert sorted(ids(hits)) == [f"f{i}#0" for i in range(5)]

    async def test_deleted_document_is_not_found(self, store, index, project) -> None:
        await save(
            store, [(chunk(project, "gone", 0), embedding(1.0)), (chunk(project, "kept", 0), embedding(0.0, 1.0))]
        )

        await store.delete_document(project, "gone")

        assert ids(await index.search(embedding(1.0), top_k=5, filters=Filters(project_id=project))) == ["kept#0"]

    async def test_a_read_answers_the_search_and_which_chunks_exist(self, store, index, project) -> None:
        other = project + "_other"
        await save(
            store, [(chunk(project, "a", 0), embedding(1.0, 0.0)), (chunk(project, "b", 0), embedding(0.0, 1.0))]
        )
        await save(store, [(chunk(other, "c", 0), embedding(1.0, 0.0))])
        filters = Filters(project_id=project)
        asked = ["b#0", "gone#0", "c#0"]

        async with index.read(project) as read:
            hits = await read.search(embedding(1.0, 0.0), top_k=1, filters=filters)
            current = await read.existing_chunks(project, asked)
            nothing = await read.search(embedding(1.0, 0.0), top_k=0, filters=filters)

        assert ids(hits) == ids(await index.search(embedding(1.0, 0.0), top_k=1, filters=filters)) == ["a#0"]
        assert current == await store.existing_chunks(project, asked)
        assert set(current) == {"b#0"}  # never another project's chunk
        assert nothing == []

    async def test_a_read_reports_a_hit_that_is_also_asked_in_both(self, store, index, project) -> None:
        await save(
            store,
            [
                (chunk(project, "a", 0), embedding(1.0, 0.0)),
                (chunk(project, "b", 0), embedding(0.6, 0.8)),
                (chunk(project, "c", 0), embedding(0.0, 1.0)),
            ],
        )
        filters = Filters(project_id=project)
        asked = ["a#0", "c#0", "gone#0"]

        async with index.read(project) as read:
            current = await read.existing_chunks(project, asked)  # before the search, as a hybrid search asks
            hits = await read.search(embedding(1.0, 0.0), top_k=2, filters=filters)
            narrowed = await read.search(
                embedding(1.0, 0.0), top_k=5, filters=Filters(project_id=project, chunk_ids=("b#0", "c#0"))
            )

        assert ids(hits) == ids(await index.search(embedding(1.0, 0.0), top_k=2, filters=filters)) == ["a#0", "b#0"]
        assert current == await store.existing_chunks(project, asked)
        assert set(current) == {"a#0", "c#0"}
        assert ids(narrowed) == ["b#0", "c#0"]  # the filter's chunk ids and the asked ones are separate lists

    async def test_a_read_confirms_only_chunks_meeting_the_filters_as_stored_now(self, store, index, project) -> None:
        await save(
            store,
            [
                (chunk(project, "public", 0, tags=("public",)), embedding(1.0, 0.0)),
                (chunk(project, "retagged", 0, tags=("private",)), embedding(0.6, 0.8)),
            ],
        )
        filters = Filters(project_id=project, tags=("public",))
        asked = ["public#0", "retagged#0"]

        async with index.read(project) as read:
            hits = await read.search(embedding(1.0, 0.0), top_k=5, filters=filters)
            current = await read.existing_chunks(project, asked, filters=filters)

        assert ids(hits) == ["public#0"]
        assert set(current) == {"public#0"}  # a lexical index still holding "retagged" as public is not confirmed
        assert current == await store.existing_chunks(project, asked, filters=filters)

    async def test_calls_on_a_read_from_concurrent_tasks_all_answer(self, store, index, project) -> None:
        await save(store, [(chunk(project, "d", i), embedding(1.0, i / 10)) for i in range(4)])
        filters = Filters(project_id=project)

        async with index.read(project) as read:
            first, current, second = await asyncio.gather(
                read.search(embedding(1.0), top_k=2, filters=filters),
                read.existing_chunks(project, ["d#3", "gone#0"]),
                read.search(embedding(1.0), top_k=3, filters=filters),
            )

        assert ids(first) == ["d#0", "d#1"]
        assert set(current) == {"d#3"}
        assert ids(second) == ["d#0", "d#1", "d#2"]

    async def test_a_read_refuses_another_projects_calls(self, store, index, project) -> None:
        await save(store, [(chunk(project, "a", 0), embedding(1.0))])
        other = Filters(project_id=project + "_other")

        async with index.read(project) as read:
            with pytest.raises(ValueError, match="project"):
                await read.search(embedding(1.0), top_k=1, filters=other)
            with pytest.raises(ValueError, match="project"):
                await read.existing_chunks(other.project_id, ["a#0"])
            assert ids(await read.search(embedding(1.0), top_k=1, filters=Filters(project_id=project))) == ["a#0"]

    async def test_ping_answers(self, index) -> None:
        await index.ping()
