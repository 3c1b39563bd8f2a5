"""Projects whose ids differ only in case keep indexes apart; roots of the unescaped naming (version 6) are rebuilt.

No file system that ignores case can be mounted here (no privileges, a kernel without ext4 casefolding): these run
on a case-sensitive one and check what such a file system would merge, the folder names under case folding. One
that ignores case is stood in for by a second, uppercase name of the version file (a link to it), which is what
the adapter probes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
import tantivy

from app.domain.models import Filters
from app.engines.tantivy_folders import PROJECTS_FOLDER, project_folder_ids
from app.engines.tantivy_index import TantivyLexicalIndex
from app.engines.tantivy_schema import (
    ANALYZER_NAME,
    SCHEMA_VERSION,
    SCHEMA_VERSION_FILE,
    build_english_analyzer,
    build_schema,
    chunk_document,
)
from tests.contract.lexical_index import index_chunks, make_chunk, search_hits, search_ids

if TYPE_CHECKING:
    from pathlib import Path

    from app.domain.models import Chunk

pytestmark = pytest.mark.integration

UNESCAPED_NAMES_VERSION = 6
"""The last version that named project folders after their ids as written (`p-Acme`)."""


def in_project(project_id: str) -> Filters:
    return Filters(project_id=project_id)


def folder_names(root: Path) -> list[str]:
    return sorted(entry.name for entry in (root / PROJECTS_FOLDER).iterdir())


def write_unescaped_root(root: Path, folders: dict[str, list[Chunk]], *, version: int) -> None:
    """A root as version 6 left it, built with tantivy directly: `projects/<name>/` for each name given."""
    (root / PROJECTS_FOLDER).mkdir(parents=True)
    (root / SCHEMA_VERSION_FILE).write_text(f"{version}\n", encoding="ascii")
    for name, chunks in folders.items():
        folder = root / PROJECTS_FOLDER / name
        folder.mkdir()
        index = tantivy.Index(build_schema(), path=str(folder))
        index.register_tokenizer(ANALYZER_NAME, build_english_analyzer())
        writer = index.writer(heap_size=15_000_000, num_threads=1)
        for chunk in chunks:
            writer.add_document(chunk_document(chunk))
        writer.commit()
        writer.wait_merging_threads()


async def test_projects_differing_only_in_case_get_folders_apart_and_delete_only_their_own(data_dir: Path) -> None:
    root = data_dir / "lexical"
    alone = TantivyLexicalIndex(data_dir / "alone")
    index = TantivyLexicalIndex(root)
    try:
        upper = make_chunk("upper-1", "quartz upper", project_id="Acme")
        lower = [make_chunk(f"lower-{n}", f"quartz lower {n}", project_id="acme") for n in (1, 2)]
        await index_chunks(index, upper, *lower)
        await index_chunks(alone, upper)
        names = folder_names(root)
        listed = project_folder_ids(root)
        upper_hits = await search_hits(index, "quartz", filters=in_project("Acme"))
        alone_hits = await search_hits(alone, "quartz", filters=in_project("Acme"))

        await index.delete_project("Acme")

        assert names == ["p-+acme", "p-acme"]
        assert len({name.casefold() for name in names}) == 2  # a file system ignoring case keeps them apart
        assert listed == ["Acme", "acme"]
        assert [(hit.chunk_id, hit.score) for hit in upper_hits] == [(hit.chunk_id, hit.score) for hit in alone_hits]
        assert folder_names(root) == ["p-acme"]
        assert await search_ids(index, "quartz", filters=in_project("Acme")) == []
        assert await search_ids(index, "quartz", filters=in_project("acme")) == ["lower-1", "lower-2"]
    finally:
        await index.close()
        await alone.close()


async def test_a_root_of_the_unescaped_naming_is_rebuilt_since_its_text_was_analyzed_otherwise(
    data_dir: Path,
) -> None:
    # Version 6 roots were renamed in place up to version 7; version 8 files text in `analysis_form`, so a root
    # of 6 (like one of 7) is emptied and every project refilled from PostgreSQL, on any file system.
    root = data_dir / "lexical"
    projects = ["Acme", "acme", "Beta.", "gamma"]
    chunks = {project: make_chunk(f"{project}-1", f"garnet {project}", project_id=project) for project in projects}
    write_unescaped_root(
        root, {f"p-{project}": [chunk] for project, chunk in chunks.items()}, version=UNESCAPED_NAMES_VERSION
    )

    index = TantivyLexicalIndex(root)
    try:
        found = {project: await search_ids(index, "garnet", filters=in_project(project)) for project in projects}

        assert index.recreated
        assert found == {project: [] for project in projects}
        assert folder_names(root) == []
        assert (root / SCHEMA_VERSION_FILE).read_text(encoding="ascii").strip() == str(SCHEMA_VERSION)
    finally:
        await index.close()


def test_a_deletion_cut_short_under_the_unescaped_naming_is_finished_at_open(data_dir: Path) -> None:
    # A `delete_project` of version 6 cut short leaves `deleted-<id as written>-<random>`: still removed.
    root = data_dir / "lexical"
    write_unescaped_root(root, {"deleted-Acme-0123": []}, version=UNESCAPED_NAMES_VERSION)

    TantivyLexicalIndex(root)

    assert folder_names(root) == []
