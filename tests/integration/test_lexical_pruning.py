"""The composition root gives the embedded lexical index PostgreSQL's word on which projects hold documents."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from app.config import Settings
from app.engines.tantivy_folders import project_folder
from app.engines.tantivy_index import TantivyLexicalIndex
from app.wiring.engines import open_engines
from tests.contract.lexical_index import index_chunks, make_chunk

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = [pytest.mark.integration, pytest.mark.slow]


async def test_the_embedded_service_prunes_the_folder_of_a_project_postgresql_holds_nothing_of(tmp_path: Path) -> None:
    settings = Settings(_env_file=None, poimen_data_dir=tmp_path / "data")  # type: ignore[call-arg]
    async with open_engines(settings) as engines:
        assert isinstance(engines.lexical, TantivyLexicalIndex)
        # Chunks of a project PostgreSQL never held (a project deleted while the service was down, say).
        await index_chunks(engines.lexical, make_chunk("ghost-1", "chalk of a deleted project", project_id="ghost"))
        assert project_folder(engines.lexical.path, "ghost").is_dir()

        await engines.lexical.replace_documents([])  # the outbox's first idle call

        assert not project_folder(engines.lexical.path, "ghost").exists()
