"""The embedded index's folder taken away under a running adapter (a volume detached, the folder moved) and back.

A real OS-level fault (`rename`, which works as root where permissions stop nothing): tantivy alone would go
on answering from its open segments; the adapter notices the folder is gone and refuses every call.
"""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING

import pytest

from app.domain.errors import EngineUnavailableError
from app.engines.tantivy_folders import project_folder
from app.engines.tantivy_index import TantivyLexicalIndex
from tests.contract.lexical_index import (
    OTHER_PROJECT,
    PROJECT,
    assert_unavailable,
    index_chunks,
    make_chunk,
    search_ids,
)

if TYPE_CHECKING:
    from pathlib import Path


async def test_a_folder_moved_away_refuses_every_call_until_it_is_back(data_dir: Path) -> None:
    path, away = data_dir / "lexical", data_dir / "lexical.detached"
    index = TantivyLexicalIndex(path)
    try:
        await index_chunks(index, make_chunk("before", "written before the outage"))
        path.rename(away)

        await assert_unavailable(index)
        away.rename(path)
        await index_chunks(index, make_chunk("after", "written after the outage"))

        assert set(await search_ids(index, "written")) == {"before", "after"}
        await index.ping()
    finally:
        await index.close()


async def test_an_empty_folder_in_its_place_stays_unavailable(data_dir: Path) -> None:
    path = data_dir / "lexical"
    index = TantivyLexicalIndex(path)
    try:
        await index_chunks(index, make_chunk("before", "written before the outage"))
        shutil.rmtree(path)
        path.mkdir()  # a blank volume: creating an index in it would hide that every document is missing

        with pytest.raises(EngineUnavailableError, match="no index of this schema"):
            await index.ping()
        await assert_unavailable(index)
        assert list(path.iterdir()) == []
    finally:
        await index.close()


async def test_a_copy_put_in_its_place_is_reopened_and_written(data_dir: Path) -> None:
    path, original = data_dir / "lexical", data_dir / "lexical.original"
    index = TantivyLexicalIndex(path)
    try:
        await index_chunks(index, make_chunk("before", "written before the copy"))
        shutil.copytree(path, data_dir / "lexical.copy", ignore=shutil.ignore_patterns(".tantivy-*.lock"))
        path.rename(original)
        (data_dir / "lexical.copy").rename(path)  # another inode: a volume restored from a snapshot

        await index_chunks(index, make_chunk("after", "kestrel written later"))

        assert set(await search_ids(index, "written")) == {"before", "after"}
    finally:
        await index.close()
    left_behind = TantivyLexicalIndex(original)
    try:
        assert await search_ids(left_behind, "kestrel") == []  # the write went to the copy at the path
    finally:
        await left_behind.close()


async def test_a_project_folder_lost_while_closed_is_refilled_at_the_next_open(data_dir: Path) -> None:
    path = data_dir / "lexical"
    first = TantivyLexicalIndex(path)
    await index_chunks(
        first, make_chunk("lost", "kestrel notes"), make_chunk("kept", "kestrel notes", project_id=OTHER_PROJECT)
    )
    await first.close()
    shutil.rmtree(project_folder(path, PROJECT))
    refilled: list[str] = []

    async def refill(project_id: str) -> int:
        refilled.append(project_id)
        return 1

    async def projects_with_documents() -> list[str]:
        return [PROJECT, OTHER_PROJECT]

    second = TantivyLexicalIndex(path, refill=refill, projects_with_documents=projects_with_documents)
    try:
        missing = await second.refill_missing_projects()
        with pytest.raises(EngineUnavailableError, match="being refilled"):
            await search_ids(second, "kestrel")  # not an empty answer that reads as "nothing matches"
        await index_chunks(second, make_chunk("lost", "kestrel notes"))  # the refill's write, through the outbox

        assert missing == [PROJECT]
        assert refilled == [PROJECT]
        assert await search_ids(second, "kestrel") == ["lost"]
    finally:
        await second.close()
