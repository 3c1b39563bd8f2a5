"""`poimen ingest` of a file indexes the chunks an HTTP ingest of the same file does: no chunking twice.

The CLI chunks each document on its own side only to count chunks for its batches, and hands the document
whole to the ingestion pipeline, which chunks it as the HTTP route's does. This test ingests the same files
both ways into one data directory (the CLI first, then a service on it) and compares what was stored.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from poimen_client.clients import PoimenClient
from poimen_client.models import Document

from tests.integration.conftest import fresh_data_dir, run_cli, spawn_service

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = [pytest.mark.slow, pytest.mark.integration]

SECTION = "A paragraph about freeing a port that is taken by another process, with lsof and kill. " * 6
NOTES = {
    "runbooks/ports.md": "---\ntags: [ops]\n---\n# Ports\n\nWhen a port is taken, run lsof.\n\n## Freeing it\n\n"
    + SECTION,
    "long.md": "# Long\n\n" + "\n\n".join(f"## Part {number}\n\n{SECTION}" for number in range(12)),
    "plain.txt": "Plain text without headings.\nA second line.\n",
    "odd name \u00fc%?.md": "# Odd\n\nA file whose name a URL must escape.\n",
}


def test_cli_and_http_ingests_of_the_same_files_store_the_same_chunks(tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    for name, text in NOTES.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text, encoding="utf-8")

    with fresh_data_dir() as data_dir:
        ingested = run_cli("ingest", str(folder), "--project", "cli", data_dir=data_dir)
        assert ingested.returncode == 0, ingested.stderr
        service = spawn_service(data_dir, log_path=tmp_path / "serve.log")
        try:
            service.wait_ready()
            with PoimenClient(service.url) as client:
                client.ingest("http", [Document(id=name, text=text) for name, text in NOTES.items()])
                stored = {
                    project: {name: client.get_document(project, name).chunks for name in NOTES}
                    for project in ("cli", "http")
                }
        finally:
            service.stop()

    for name in NOTES:
        cli_chunks, http_chunks = stored["cli"][name], stored["http"][name]
        assert [chunk.text for chunk in cli_chunks] == [chunk.text for chunk in http_chunks], name
        assert [chunk.position for chunk in cli_chunks] == list(range(len(http_chunks))), name
    assert len(stored["cli"]["long.md"]) == 12  # one chunk per part: a note of several chunks, counted alike
