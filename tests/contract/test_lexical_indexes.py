"""The lexical contract on the in-memory fake and on tantivy, plus what only an on-disk index has."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import tantivy

from app.domain.errors import EngineUnavailableError
from app.domain.models import DocumentChunks, Filters
from app.engines.memory_analysis import light_stem
from app.engines.memory_lexical import InMemoryLexicalIndex
from app.engines.tantivy_folders import refill_queued
from app.engines.tantivy_index import TantivyLexicalIndex
from app.engines.tantivy_schema import (
    CONTEXT,
    SCHEMA_FIELD_NAMES,
    SCHEMA_VERSION,
    SCHEMA_VERSION_FILE,
    TAGS_TEXT,
    build_schema,
)
from tests.contract.lexical_index import (
    PROJECT,
    LexicalIndexContract,
    assert_unavailable,
    index_chunks,
    make_chunk,
    search_hits,
    search_ids,
)
from tests.contract.tantivy_layouts import TEXT_FIELDS, V1_TEXT_FIELDS, write_poimen_index

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from app.domain.ports import LexicalIndex

REPOSITORY_ROOT = Path(__file__).resolve().parents[2]

# Holds the writer of the index at argv[1] until its stdin closes.
WRITER_HOLDER = """
import asyncio, sys
from pathlib import Path
from app.engines.tantivy_index import TantivyLexicalIndex
from tests.contract.lexical_index import index_chunks, make_chunk

async def main():
    index = TantivyLexicalIndex(Path(sys.argv[1]))
    await index_chunks(index, make_chunk("held", "written by the holder process"))
    print("ready", flush=True)
    sys.stdin.read()
    await index.close()

asyncio.run(main())
"""


class TestInMemoryLexicalIndex(LexicalIndexContract):
    @pytest.fixture
    def index(self) -> LexicalIndex:
        return InMemoryLexicalIndex()


@pytest.mark.integration
class TestTantivyLexicalIndex(LexicalIndexContract):
    @pytest.fixture
    async def index(self, data_dir: Path) -> AsyncIterator[LexicalIndex]:
        index = TantivyLexicalIndex(data_dir / "lexical")
        yield index
        await index.close()


@pytest.fixture(params=["memory", "tantivy"])
async def any_index(request: pytest.FixtureRequest, data_dir: Path) -> AsyncIterator[LexicalIndex]:
    """Both adapters, for behaviour of this implementation beyond the shared contract."""
    if request.param == "memory":
        yield InMemoryLexicalIndex()
        return
    index = TantivyLexicalIndex(data_dir / "lexical")
    yield index
    await index.close()


async def test_source_words_are_searched(any_index: LexicalIndex) -> None:
    await index_chunks(
        any_index,
        make_chunk("c-unseal", "Follow the steps.", source="runbooks/vault-unseal.md"),
        make_chunk("c-other", "Follow the steps.", source="runbooks/redis.md"),
    )

    assert await search_ids(any_index, "unseal") == ["c-unseal"]


async def test_a_content_match_outranks_a_tag_only_match(any_index: LexicalIndex) -> None:
    await index_chunks(
        any_index,
        make_chunk("c-says-it", "Networking basics: subnets and routes.", tags=("basics",)),
        make_chunk("c-tagged", "Subnets and routes explained.", tags=("networking",)),
    )

    assert await search_ids(any_index, "networking") == ["c-says-it", "c-tagged"]


async def test_the_last_entry_of_a_document_in_a_batch_wins(any_index: LexicalIndex) -> None:
    older = DocumentChunks(PROJECT, "d1", (make_chunk("v1", "iota first version", document_id="d1"),))
    newer = DocumentChunks(PROJECT, "d1", (make_chunk("v2", "iota second version", document_id="d1"),))

    await any_index.replace_documents([older, newer])

    assert await search_ids(any_index, "iota") == ["v2"]


async def test_concurrent_writes_all_land(any_index: LexicalIndex) -> None:
    await asyncio.gather(
        *(index_chunks(any_index, make_chunk(f"c-{number}", f"kappa entry {number}")) for number in range(8))
    )

    assert len(await search_ids(any_index, "kappa", top_k=20)) == 8


async def test_a_phrase_skips_the_same_stop_word_gap(any_index: LexicalIndex) -> None:
    await index_chunks(
        any_index,
        make_chunk("c-gap", "first run the backup job"),
        make_chunk("c-tight", "first run backup job"),
    )

    assert await search_ids(any_index, "", phrases=("run the backup",)) == ["c-gap"]


async def test_close_makes_every_call_unavailable(any_index: LexicalIndex) -> None:
    await index_chunks(any_index, make_chunk("c-1", "lambda"))

    await any_index.close()  # type: ignore[attr-defined]

    await assert_unavailable(any_index)
    await any_index.close()  # type: ignore[attr-defined]


def test_light_stem_meets_inflections() -> None:
    assert light_stem("running") == light_stem("runs") == light_stem("run") == "run"
    assert light_stem("configured") == light_stem("configure") == light_stem("configures")
    assert light_stem("queries") == light_stem("query")
    assert light_stem("pass") == "pass"


@pytest.mark.integration
class TestTantivyOnDisk:
    async def test_committed_chunks_survive_reopen(self, data_dir: Path) -> None:
        chunk = make_chunk("c-1", "persisted across restarts", tags=("durable",), breadcrumb=("a", "b"))
        first = TantivyLexicalIndex(data_dir / "lexical")
        await index_chunks(first, chunk)
        await first.close()

        reopened = TantivyLexicalIndex(data_dir / "lexical")
        try:
            hits = await search_hits(reopened, "persisted restarts")
            await index_chunks(reopened, make_chunk("c-2", "written after reopen"))
            assert [hit.chunk for hit in hits] == [chunk]
            assert await search_ids(reopened, "reopen") == ["c-2"]
        finally:
            await reopened.close()

    async def test_a_writer_held_by_another_process_refuses_writes_until_freed(self, data_dir: Path) -> None:
        path = data_dir / "lexical"
        with subprocess.Popen(  # leaving the block closes its pipes
            [sys.executable, "-c", WRITER_HOLDER, str(path)],
            cwd=REPOSITORY_ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        ) as holder:
            index: TantivyLexicalIndex | None = None
            try:
                assert holder.stdout is not None
                assert holder.stdin is not None
                assert holder.stdout.readline().strip() == "ready"
                index = TantivyLexicalIndex(path)

                with pytest.raises(EngineUnavailableError, match="LockBusy") as refused:
                    await index_chunks(index, make_chunk("mine", "written by the test process"))
                assert refused.value.engine == "tantivy"
                assert await search_ids(index, "holder") == ["held"]  # reading needs no lock

                holder.stdin.close()
                assert holder.wait(timeout=30) == 0
                await index_chunks(index, make_chunk("mine", "written by the test process"))
                assert set(await search_ids(index, "written")) == {"held", "mine"}
            finally:
                if holder.poll() is None:
                    holder.kill()
                    holder.wait(timeout=30)
                if index is not None:
                    await index.close()

    async def test_close_releases_the_writer_for_a_new_instance(self, data_dir: Path) -> None:
        first = TantivyLexicalIndex(data_dir / "lexical")
        await index_chunks(first, make_chunk("c-1", "mu first"))
        await first.close()

        second = TantivyLexicalIndex(data_dir / "lexical")
        try:
            await index_chunks(second, make_chunk("c-2", "mu second"))
            assert set(await search_ids(second, "mu")) == {"c-1", "c-2"}
        finally:
            await second.close()

    def test_schema_field_names_match_the_schema(self, data_dir: Path) -> None:
        tantivy.Index(build_schema(), path=str(data_dir))

        stored = json.loads((data_dir / "meta.json").read_text())["schema"]

        assert {field["name"] for field in stored} == SCHEMA_FIELD_NAMES

    # Each older layout: version 1 (no version file) before tags were searched as words, before the
    # context field, and with the title fields apart; and a version file naming an older version
    # (2: the same fields, one index for every project; 8: text filed with Arabic and Hebrew diacritics kept; 9: a run
    # of Thai letters filed as one word).
    @pytest.mark.parametrize(
        ("text_fields", "version"),
        [
            (V1_TEXT_FIELDS - {TAGS_TEXT, CONTEXT}, None),
            (V1_TEXT_FIELDS - {CONTEXT}, None),
            (V1_TEXT_FIELDS, None),
            (TEXT_FIELDS, "1"),
            (TEXT_FIELDS, "2"),  # one index for every project, at the root
            (TEXT_FIELDS, "8"),
            (TEXT_FIELDS, "9"),
        ],
    )
    async def test_a_folder_of_an_older_schema_is_recreated_empty(
        self,
        data_dir: Path,
        caplog: pytest.LogCaptureFixture,
        text_fields: frozenset[str],
        version: str | None,
    ) -> None:
        path = data_dir / "lexical"
        write_poimen_index(path, text_fields, version=version)

        index = TantivyLexicalIndex(path)
        try:
            await index_chunks(index, make_chunk("c-1", "Subnets.", tags=("networking",)))
            assert index.recreated
            assert await search_ids(index, "networking") == ["c-1"]
            assert "had an older schema" in caplog.text
            assert "recreated empty" in caplog.text
        finally:
            await index.close()
        assert (path / SCHEMA_VERSION_FILE).read_text().strip() == str(SCHEMA_VERSION)
        refill_queued(path)  # what the service does once it has queued every project (app.wiring.engines)
        reopened = TantivyLexicalIndex(path)
        try:
            assert not reopened.recreated
            assert await search_ids(reopened, "networking") == ["c-1"]
        finally:
            await reopened.close()

    def test_a_folder_of_a_newer_schema_is_unavailable(self, data_dir: Path) -> None:
        path = data_dir / "lexical"
        write_poimen_index(path, TEXT_FIELDS | {"added_later"}, version=str(SCHEMA_VERSION + 1))

        with pytest.raises(EngineUnavailableError, match="newer version"):
            TantivyLexicalIndex(path)
        assert (path / "meta.json").exists()  # not wiped

    def test_a_folder_with_another_schema_is_unavailable(self, data_dir: Path) -> None:
        path = data_dir / "lexical"
        path.mkdir()
        builder = tantivy.SchemaBuilder()
        builder.add_text_field("something_else", stored=True)
        tantivy.Index(builder.build(), path=str(path))

        with pytest.raises(EngineUnavailableError, match="schema") as refused:
            TantivyLexicalIndex(path)
        assert refused.value.engine == "tantivy"

    def test_a_file_where_the_folder_goes_is_said_to_be_no_folder(self, data_dir: Path) -> None:
        # mkdir's own "[Errno 17] File exists" read as if the folder were fine (`poimen ingest` said it so).
        path = data_dir / "lexical"
        path.write_text("not a folder", encoding="utf-8")

        with pytest.raises(EngineUnavailableError) as refused:
            TantivyLexicalIndex(path)

        assert (
            refused.value.message == f"cannot open the lexical index in {path}: Not a directory (a file has its name)"
        )
        assert path.read_text(encoding="utf-8") == "not a folder"

    async def test_sub_second_event_times_filter_exactly(self, data_dir: Path) -> None:
        # tantivy's date fields index whole seconds; the adapter must still honour microseconds.
        moment = datetime(2025, 3, 1, 12, 0, 0, 500_000, tzinfo=UTC)
        index = TantivyLexicalIndex(data_dir / "lexical")
        try:
            await index_chunks(index, make_chunk("c-1", "nu", event_time=moment))
            tight = Filters(
                PROJECT,
                event_time_from=moment - timedelta(microseconds=1),
                event_time_to=moment + timedelta(microseconds=1),
            )
            later = Filters(PROJECT, event_time_from=moment + timedelta(microseconds=1))
            assert await search_ids(index, "nu", filters=tight) == ["c-1"]
            assert await search_ids(index, "nu", filters=later) == []
        finally:
            await index.close()


@pytest.mark.integration
async def test_a_cancelled_write_still_completes_before_the_next(data_dir: Path) -> None:
    index = TantivyLexicalIndex(data_dir / "lexical")
    try:
        batch = [
            make_chunk(f"c-{number}", f"xi bulk entry {number}", document_id=f"d-{number}") for number in range(300)
        ]
        write = asyncio.create_task(index_chunks(index, *batch))
        await asyncio.sleep(0)
        write.cancel()
        await index_chunks(index, make_chunk("c-next", "xi next"))

        with pytest.raises(asyncio.CancelledError):
            await write
        assert "c-next" in await search_ids(index, "xi", top_k=500)
    finally:
        await index.close()
