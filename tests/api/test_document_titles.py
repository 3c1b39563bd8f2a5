"""An HTTP write and `poimen ingest` title the same note alike (`app.ingestion.titles`), so they chunk it alike.

An HTTP write of `# Ports ...` without a title stored the title "" and its section at level L1; the CLI
read the same file as titled "Ports", the section at L0.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from app.ingestion.sources import read_documents
from tests.api.conftest import api_settings, app_client, build_engines

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from litestar import Litestar
    from litestar.testing import AsyncTestClient

    from app.engines.embedder import ServingEmbedder

NOTES = {
    "ports.md": "# Ports\n\nIf port 8080 is taken, run lsof.\n\n## Freeing it\n\nKill the process.\n",
    "titled.md": "---\ntitle: Incident review\n---\n# Timeline\n\nIt started at noon.\n",
    "intro.md": "Some words before any heading.\n\n## Later\n\nMore words.\n",
}


@pytest.fixture(scope="module")
async def client(
    api_postgres_url: str, embedder: ServingEmbedder, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[AsyncTestClient[Litestar]]:
    data_dir = tmp_path_factory.mktemp("document_titles")
    async with (
        build_engines(database_url=api_postgres_url, lexical_path=data_dir / "lexical", embedder=embedder) as built,
        app_client(built.app(api_settings(data_dir))) as test_client,
    ):
        yield test_client


async def test_an_http_write_titles_a_note_as_poimen_ingest_reads_the_file(client, unique_name, tmp_path: Path) -> None:
    for name, text in NOTES.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    read_by_cli = {document.document_id: document.title for document in read_documents(tmp_path, project_id="p")}

    written = await client.post(
        f"/v1/projects/{unique_name}/documents", json={"documents": [{"id": n, "text": t} for n, t in NOTES.items()]}
    )
    stored = {name: (await client.get(f"/v1/projects/{unique_name}/documents/{name}")).json() for name in NOTES}

    assert written.status_code == 201, written.text
    assert {name: document["title"] for name, document in stored.items()} == read_by_cli
    assert read_by_cli == {"ports.md": "Ports", "titled.md": "Incident review", "intro.md": "Later"}
    assert stored["ports.md"]["chunks"][0]["level"] == "L0"  # the top heading is the title: the document's own level
