"""`poimen query`, `poimen export` and `poimen import`, run for real in subprocesses.

A project exported from one data directory and imported into a fresh one answers a sample of queries
identically (ids, ranks and scores), and the import embeds nothing: it says `embedded: 0`, and the
fresh directory's store holds exactly the exported vectors.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.conftest import run_cli

pytestmark = [pytest.mark.slow, pytest.mark.integration]

NOTES = Path(__file__).resolve().parents[1] / "fixtures" / "notes"
PROJECT = "notes"
QUERIES = ["port forwarding", "platypus checklist", "retrospective action items", "backups restore"]


@pytest.fixture
def data_dirs(tmp_path: Path) -> tuple[Path, Path]:
    return tmp_path / "source-data", tmp_path / "fresh-data"


def answers(data_dir: Path) -> list[list[tuple[str, int, float]]]:
    result = run_cli("query", *QUERIES, "--project", PROJECT, "--json", data_dir=data_dir)
    assert result.returncode == 0, result.stderr
    responses = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    assert [response["query"] for response in responses] == QUERIES
    return [[(hit["id"], hit["rank"], round(hit["final_score"], 6)) for hit in r["results"]] for r in responses]


def test_exporting_a_project_without_documents_fails_and_writes_nothing(data_dirs, tmp_path) -> None:
    source, _ = data_dirs
    export_file = tmp_path / "typo.jsonl"
    assert run_cli("ingest", str(NOTES), "--project", PROJECT, data_dir=source).returncode == 0

    exported = run_cli("export", "--project", "nots", "--output", str(export_file), data_dir=source)

    assert exported.returncode == 1, exported.stderr
    assert exported.stderr.strip().endswith(
        f"project 'nots' holds no documents; nothing exported (projects: {PROJECT})"
    )
    assert not export_file.exists()


def test_export_then_import_into_a_fresh_directory_answers_identically_and_embeds_nothing(data_dirs, tmp_path) -> None:
    source, fresh = data_dirs
    export_file = tmp_path / "notes.jsonl"
    assert run_cli("ingest", str(NOTES), "--project", PROJECT, data_dir=source).returncode == 0
    before = answers(source)

    exported = run_cli("export", "--project", PROJECT, "--output", str(export_file), data_dir=source)
    imported = run_cli("import", str(export_file), data_dir=fresh)
    after = answers(fresh)

    assert exported.returncode == 0, exported.stderr
    assert imported.returncode == 0, imported.stderr
    assert "embedded: 0" in imported.stderr
    assert after == before
    assert any(hits for hits in before)
    header, *documents = (json.loads(line) for line in export_file.read_text().splitlines())
    assert header["embedding_model"] == "all-MiniLM-L6-v2"
    assert len(documents) == 4
    assert all(len(chunk["embedding"]) == header["dimensions"] for d in documents for chunk in d["chunks"])


def test_query_prints_a_table_by_default(data_dirs) -> None:
    source, _ = data_dirs
    assert run_cli("ingest", str(NOTES), "--project", PROJECT, data_dir=source).returncode == 0

    result = run_cli("query", "platypus checklist", "--project", PROJECT, "--limit", "3", data_dir=source)

    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith('"platypus checklist":')
    assert lines[1].split() == ["rank", "score", "sem", "lex", "document", "text"]
    assert lines[2].split()[0] == "1"
    assert "runbooks/backups.md" in lines[2]


def test_import_refuses_a_file_made_with_another_model(data_dirs, tmp_path) -> None:
    _, fresh = data_dirs
    export_file = tmp_path / "other.jsonl"
    header = {"kind": "header", "format": "poimen-export", "version": 1, "project": "p", "embedding_model": "m"}
    export_file.write_text(json.dumps(header | {"dimensions": 3}) + "\n")

    result = run_cli("import", str(export_file), data_dir=fresh)

    assert result.returncode == 2
    assert "EMBEDDING_MODEL" in result.stderr
