"""The embedded index keeps one tantivy index per project: folders, bounds on what stays open, deletes."""

from __future__ import annotations

import logging
import shutil
from typing import TYPE_CHECKING

import pytest

from app.domain.errors import EngineUnavailableError
from app.domain.models import Filters
from app.engines.tantivy_folders import INDEX_META_FILE, PROJECTS_FOLDER, project_folder
from app.engines.tantivy_index import TantivyLexicalIndex
from app.engines.tantivy_schema import SCHEMA_VERSION, SCHEMA_VERSION_FILE
from tests.contract.lexical_index import (
    OTHER_PROJECT,
    PROJECT,
    Holdings,
    deletion_of,
    index_chunks,
    make_chunk,
    search_hits,
    search_ids,
)

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.integration


def in_project(project_id: str) -> Filters:
    return Filters(project_id=project_id)


async def test_each_project_gets_a_folder_and_delete_project_removes_only_its_own(data_dir: Path) -> None:
    root = data_dir / "lexical"
    index = TantivyLexicalIndex(root)
    try:
        await index_chunks(
            index,
            make_chunk("a-1", "omicron alpha", project_id=PROJECT),
            make_chunk("b-1", "omicron beta", project_id=OTHER_PROJECT),
        )
        folders_before = sorted(entry.name for entry in (root / PROJECTS_FOLDER).iterdir())

        await index.delete_project(OTHER_PROJECT)

        assert folders_before == [f"p-{PROJECT}", f"p-{OTHER_PROJECT}"]
        assert (project_folder(root, PROJECT) / INDEX_META_FILE).is_file()
        assert not project_folder(root, OTHER_PROJECT).exists()
        assert sorted(entry.name for entry in (root / PROJECTS_FOLDER).iterdir()) == [f"p-{PROJECT}"]
        assert await search_ids(index, "omicron") == ["a-1"]
        assert await search_ids(index, "omicron", filters=in_project(OTHER_PROJECT)) == []
        await index.delete_project("never-written")  # nothing to delete is fine
    finally:
        await index.close()


async def test_a_folder_holding_another_projects_chunks_answers_with_the_projects_own(
    data_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The query names no project (each has an index of its own); a folder copied under another project's name
    # holds the first project's chunks, which must not answer the second's search, however well they score.
    root = data_dir / "lexical"
    index = TantivyLexicalIndex(root)
    try:
        await index_chunks(
            index,
            make_chunk("a-1", "omicron omicron omicron", project_id=PROJECT, document_id="a"),
            make_chunk("a-2", "omicron omicron", project_id=PROJECT, document_id="a"),
        )
    finally:
        await index.close()
    shutil.copytree(project_folder(root, PROJECT), project_folder(root, OTHER_PROJECT))
    index = TantivyLexicalIndex(root)
    try:
        await index_chunks(index, make_chunk("b-1", "omicron and more words", project_id=OTHER_PROJECT))
        with caplog.at_level(logging.WARNING, logger="app.engines.tantivy_query"):
            best = await search_hits(index, "omicron", top_k=1, filters=in_project(OTHER_PROJECT))

        assert [(hit.chunk_id, hit.chunk.project_id) for hit in best] == [("b-1", OTHER_PROJECT)]
        assert await search_ids(index, "omicron", filters=in_project(OTHER_PROJECT)) == ["b-1"]
        assert await search_ids(index, "omicron", filters=in_project(PROJECT)) == ["a-1", "a-2"]
        assert f"the lexical index of project {OTHER_PROJECT!r} holds another project's chunks" in caplog.text
    finally:
        await index.close()


async def test_a_search_of_a_project_without_chunks_creates_no_folder(data_dir: Path) -> None:
    root = data_dir / "lexical"
    index = TantivyLexicalIndex(root)
    try:
        assert await search_ids(index, "anything", filters=in_project("unknown")) == []
        assert list((root / PROJECTS_FOLDER).iterdir()) == []
    finally:
        await index.close()


async def test_projects_stay_searchable_and_writable_past_the_open_bounds(data_dir: Path) -> None:
    projects = [f"proj-{number}" for number in range(6)]
    bounded = TantivyLexicalIndex(data_dir / "bounded", max_open_indexes=2, max_open_writers=1)
    unbounded = TantivyLexicalIndex(data_dir / "unbounded")
    try:
        for index in (bounded, unbounded):
            await index_chunks(  # one batch spanning every project, then one write per project
                index,
                *(make_chunk(f"{project}-1", f"sigma first {project}", project_id=project) for project in projects),
            )
            for project in projects:
                await index_chunks(index, make_chunk(f"{project}-2", "sigma second sigma", project_id=project))
        open_after_writes = bounded.open_project_indexes

        found = {
            project: [
                (hit.chunk_id, hit.score) for hit in await search_hits(bounded, "sigma", filters=in_project(project))
            ]
            for project in projects
        }
        expected = {
            project: [
                (hit.chunk_id, hit.score) for hit in await search_hits(unbounded, "sigma", filters=in_project(project))
            ]
            for project in projects
        }

        assert open_after_writes <= 2
        assert bounded.open_project_indexes <= 2
        assert unbounded.open_project_indexes == len(projects)
        assert found == expected
        assert all(
            [chunk_id for chunk_id, _ in hits] == [f"{project}-2", f"{project}-1"] for project, hits in found.items()
        )
    finally:
        await bounded.close()
        await unbounded.close()


async def test_a_project_folder_removed_under_the_process_is_refilled_and_refused_until_written(data_dir: Path) -> None:
    root = data_dir / "lexical"
    refilled: list[str] = []

    async def refill(project_id: str) -> int:
        refilled.append(project_id)
        return 1

    index = TantivyLexicalIndex(root, refill=refill)
    try:
        await index_chunks(index, make_chunk("a-1", "tau written"))
        shutil.rmtree(project_folder(root, PROJECT))  # not through delete_project: its documents are missing

        with pytest.raises(EngineUnavailableError, match="refilling project"):
            await search_ids(index, "tau")
        # Not an empty answer that reads as "nothing matches": refused until the refill's write commits.
        with pytest.raises(EngineUnavailableError, match="being refilled from PostgreSQL"):
            await search_ids(index, "tau")
        await index.ping()  # the root itself is intact
        await index_chunks(index, make_chunk("a-1", "tau written"))  # what the outbox writes for the refill

        assert await search_ids(index, "tau") == ["a-1"]
        assert refilled == [PROJECT]
    finally:
        await index.close()


def test_a_deletion_cut_short_is_finished_at_open(data_dir: Path) -> None:
    root = data_dir / "lexical"
    TantivyLexicalIndex(root)
    leftover = root / PROJECTS_FOLDER / "deleted-proj-alpha-0123"
    leftover.mkdir()
    (leftover / INDEX_META_FILE).write_text("{}")

    TantivyLexicalIndex(root)

    assert not leftover.exists()


def test_a_folder_holding_other_files_is_refused_untouched(data_dir: Path) -> None:
    root = data_dir / "lexical"
    root.mkdir()
    (root / "notes.txt").write_text("not an index")

    with pytest.raises(EngineUnavailableError, match="no lexical index"):
        TantivyLexicalIndex(root)
    assert sorted(entry.name for entry in root.iterdir()) == ["notes.txt"]


async def test_an_older_root_with_project_folders_is_emptied_whole(data_dir: Path) -> None:
    root = data_dir / "lexical"
    first = TantivyLexicalIndex(root)
    await index_chunks(first, make_chunk("a-1", "upsilon"))
    await first.close()
    # As if written by version 5, the last one rebuilt rather than renamed (test_tantivy_folder_case.py).
    (root / SCHEMA_VERSION_FILE).write_text("5\n")

    reopened = TantivyLexicalIndex(root)
    try:
        assert reopened.recreated
        assert await search_ids(reopened, "upsilon") == []
        assert list((root / PROJECTS_FOLDER).iterdir()) == []
        assert (root / SCHEMA_VERSION_FILE).read_text().strip() == str(SCHEMA_VERSION)
    finally:
        await reopened.close()


def pruning_index(root: Path, holdings: Holdings) -> TantivyLexicalIndex:
    return TantivyLexicalIndex(root, holds_documents=holdings.holds, projects_with_documents=holdings.listed)


async def test_a_project_whose_last_document_is_deleted_loses_its_folder_and_others_keep_theirs(
    data_dir: Path,
) -> None:
    root, holdings = data_dir / "lexical", Holdings(PROJECT, OTHER_PROJECT)
    index = pruning_index(root, holdings)
    try:
        await index_chunks(
            index,
            make_chunk("a-1", "obsidian alpha", project_id=PROJECT, document_id="a"),
            make_chunk("b-1", "obsidian beta", project_id=OTHER_PROJECT, document_id="b"),
        )
        await index.replace_documents([deletion_of(PROJECT, "a")])  # PostgreSQL still holds one: kept
        assert project_folder(root, PROJECT).is_dir()
        holdings.project_ids.discard(PROJECT)  # the project deleted in PostgreSQL

        await index.replace_documents([deletion_of(PROJECT, "a")])  # its last document's delete

        assert not project_folder(root, PROJECT).exists()
        assert sorted(entry.name for entry in (root / PROJECTS_FOLDER).iterdir()) == [f"p-{OTHER_PROJECT}"]
        assert await search_ids(index, "obsidian", filters=in_project(PROJECT)) == []
        assert await search_ids(index, "obsidian", filters=in_project(OTHER_PROJECT)) == ["b-1"]
        holdings.project_ids.add(PROJECT)  # written again: a new folder
        await index_chunks(index, make_chunk("a-2", "obsidian again", project_id=PROJECT, document_id="a"))
        assert await search_ids(index, "obsidian", filters=in_project(PROJECT)) == ["a-2"]
    finally:
        await index.close()


async def test_the_idle_call_prunes_folders_of_projects_holding_no_document_once_per_interval(data_dir: Path) -> None:
    root, holdings = data_dir / "lexical", Holdings(PROJECT, OTHER_PROJECT)
    index = pruning_index(root, holdings)
    try:
        await index_chunks(
            index,
            make_chunk("a-1", "pumice alpha", project_id=PROJECT),
            make_chunk("b-1", "pumice beta", project_id=OTHER_PROJECT),
        )
        await index.replace_documents([])  # the first idle call prunes: nothing emptied yet
        holdings.project_ids.discard(OTHER_PROJECT)  # deleted in PostgreSQL without a delete through this index

        await index.replace_documents([])  # within the interval: no second prune
        assert project_folder(root, OTHER_PROJECT).is_dir()
        assert await index.prune_emptied_projects() == [OTHER_PROJECT]

        assert sorted(entry.name for entry in (root / PROJECTS_FOLDER).iterdir()) == [f"p-{PROJECT}"]
        assert await index.prune_emptied_projects() == []
        assert await search_ids(index, "pumice") == ["a-1"]
    finally:
        await index.close()


async def test_a_project_holding_documents_is_never_pruned_even_when_missing_from_the_listing(data_dir: Path) -> None:
    # The listing and the question under the lock can disagree (a document committed in between): the
    # question under the lock decides.
    root = data_dir / "lexical"
    holdings = Holdings(PROJECT)
    index = TantivyLexicalIndex(root, holds_documents=holdings.holds, projects_with_documents=Holdings().listed)
    try:
        await index_chunks(index, make_chunk("a-1", "tuff alpha", project_id=PROJECT))
        assert await index.prune_emptied_projects() == []
        assert await search_ids(index, "tuff") == ["a-1"]
    finally:
        await index.close()
