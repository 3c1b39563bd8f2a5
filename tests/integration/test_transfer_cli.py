"""`poimen query`, `poimen export` and `poimen import`, run for real in subprocesses.

A project exported from one data directory and imported into a fresh one answers a sample of queries
identically (ids, ranks and scores), and the import embeds nothing: it says `embedded: 0`, and the
fresh directory's store holds exactly the exported vectors.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from app.ingestion.record_hashes import record_hash
from tests.integration.conftest import cli_environment, poimen_executable, run_cli

if TYPE_CHECKING:
    from collections.abc import Callable

    from tests.integration.conftest import ServiceProcess

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
    again = run_cli("import", str(export_file), data_dir=fresh)
    after = answers(fresh)

    assert exported.returncode == 0, exported.stderr
    assert imported.returncode == 0, imported.stderr
    assert "4 created, 0 updated (replaced by the exported version), 0 unchanged" in imported.stderr
    assert "embedded: 0" in imported.stderr
    assert again.returncode == 0, again.stderr
    assert "0 created, 0 updated (replaced by the exported version), 4 unchanged; 0 chunks written" in again.stderr
    assert after == before
    assert any(hits for hits in before)
    header, *documents, end = (json.loads(line) for line in export_file.read_text().splitlines())
    assert header["embedding_model"] == "all-MiniLM-L6-v2"
    assert len(documents) == 4
    assert end == {"kind": "end", "documents": 4}
    assert "4 documents of" in exported.stderr
    assert all(len(chunk["embedding"]) == header["dimensions"] for d in documents for chunk in d["chunks"])


def test_export_import_and_reindex_load_no_embedding_model(data_dirs, tmp_path) -> None:
    # They embed nothing, yet loaded the model: an import of 300 SciFact abstracts peaked at 991 MB RSS in a
    # fresh data folder (its first start exports the model to ONNX, which loads torch), 462 MB in one with the
    # export. Loading the model is what writes that export, so its folder shows whether the model was loaded.
    source, fresh = data_dirs
    export_file, model_folder = tmp_path / "notes.jsonl", tmp_path / "onnx-export"
    assert run_cli("ingest", str(NOTES), "--project", PROJECT, data_dir=source).returncode == 0

    elsewhere = {"EMBEDDING_ONNX_DIR": str(model_folder)}
    exported = run_cli("export", "--project", PROJECT, "--output", str(export_file), data_dir=source, **elsewhere)
    imported = run_cli("import", str(export_file), data_dir=fresh, **elsewhere)
    reindexed = run_cli("reindex", "--project", PROJECT, data_dir=fresh, **elsewhere)

    assert [exported.returncode, imported.returncode, reindexed.returncode] == [0, 0, 0], imported.stderr
    assert "4 created" in imported.stderr
    assert not model_folder.exists()
    assert answers(fresh) == answers(source)


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


def test_import_reads_a_file_an_editor_saved_with_a_byte_order_mark(data_dirs, tmp_path) -> None:
    _, fresh = data_dirs
    export_file = tmp_path / "saved-by-an-editor.jsonl"
    header = {"kind": "header", "format": "poimen-export", "version": 1, "project": "p", "embedding_model": "m"}
    export_file.write_text("\ufeff" + json.dumps(header | {"dimensions": 3}) + "\n", encoding="utf-8")

    result = run_cli("import", str(export_file), data_dir=fresh)

    # The header is read as a header (then refused for its model), not taken for some other file.
    assert result.returncode == 2
    assert "EMBEDDING_MODEL" in result.stderr, result.stderr


def test_an_import_from_a_pipe_is_refused_before_anything_starts(data_dirs) -> None:
    # Read twice (checked, then written), a pipe was empty the second time: "import stopped part-way (earlier
    # batches are written; run it again): not a poimen-export file", exit 1, with a data directory created.
    _, fresh = data_dirs
    header = {"kind": "header", "format": "poimen-export", "version": 1, "project": "p"}
    export = json.dumps(header | {"embedding_model": "all-MiniLM-L6-v2", "dimensions": 384}) + "\n"

    result = subprocess.run(
        [poimen_executable(), "import", "/dev/stdin"],
        input=export,
        cwd=fresh.parent,
        env=cli_environment(fresh),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )

    assert result.returncode == 2, result.stderr
    assert "/dev/stdin is not a regular file" in result.stderr
    assert not fresh.exists()


def test_an_import_of_a_folder_names_the_folder_and_asks_for_an_export_file(data_dirs, tmp_path) -> None:
    # It said "... is not a regular file (a pipe or standard input?)": a folder is neither.
    _, fresh = data_dirs
    folder = tmp_path / "exports"
    folder.mkdir()

    result = run_cli("import", str(folder), data_dir=fresh)

    assert result.returncode == 2, result.stderr
    assert f"cannot read {folder}: it is a folder; import reads one file written by `poimen export`" in result.stderr
    assert "pipe" not in result.stderr
    assert not fresh.exists()


def renamed(record: dict, document_id: str) -> dict:
    """An exported document record under another id, its chunks named after it as ingest names them, rehashed."""
    chunks = [chunk | {"id": f"{document_id}#{chunk['position']}"} for chunk in record["chunks"]]
    copy = record | {"id": document_id, "chunks": chunks}
    return copy | {"record_hash": record_hash(copy)}


def test_an_export_cut_off_after_many_documents_imports_nothing(data_dirs, tmp_path) -> None:
    # Written in transactions of 200 as read: a file refused at line 252 had written 200 documents.
    source, fresh = data_dirs
    export_file, cut_file = tmp_path / "notes.jsonl", tmp_path / "cut.jsonl"
    assert run_cli("ingest", str(NOTES), "--project", PROJECT, data_dir=source).returncode == 0
    assert run_cli("export", "--project", PROJECT, "--output", str(export_file), data_dir=source).returncode == 0
    header, record = export_file.read_text().splitlines()[:2]
    copies = [renamed(json.loads(record), f"copy-{number}.md") for number in range(250)]
    lines = [header, *(json.dumps(copy) for copy in copies), record[: len(record) // 2]]
    cut_file.write_text("\n".join(lines) + "\n")

    imported = run_cli("import", str(cut_file), data_dir=fresh)
    exported = run_cli("export", "--project", PROJECT, data_dir=fresh)

    assert imported.returncode == 2, imported.stderr
    assert "import refused, nothing written: line 252" in imported.stderr
    assert exported.returncode == 1
    assert "no data under" in exported.stderr  # refused before any engine started: not even a database


def test_an_export_that_cannot_be_written_says_so_in_one_line(data_dirs, tmp_path) -> None:
    source, _ = data_dirs
    assert run_cli("ingest", str(NOTES), "--project", PROJECT, data_dir=source).returncode == 0

    exported = run_cli("export", "--project", PROJECT, "--output", str(tmp_path / "no" / "x.jsonl"), data_dir=source)

    assert exported.returncode == 1
    assert "Traceback" not in exported.stderr
    assert exported.stderr.strip().splitlines()[-1].startswith(f"cannot write {tmp_path / 'no' / 'x.jsonl'}:")
    assert not (tmp_path / "no").exists()


def test_a_corpus_with_one_bad_id_writes_nothing_whatever_the_batch_size(data_dirs, tmp_path) -> None:
    source, _ = data_dirs
    corpus = tmp_path / "corpus.jsonl"
    records = [{"_id": f"doc-{number}", "title": "", "text": f"good document {number}"} for number in range(30)]
    records.insert(25, {"_id": "bad//id", "title": "", "text": "its id has an empty part"})
    corpus.write_text("\n".join(json.dumps(record) for record in records) + "\n")

    ingested = run_cli("ingest", str(corpus), "--project", PROJECT, "--batch-size", "10", data_dir=source)
    exported = run_cli("export", "--project", PROJECT, data_dir=source)

    assert ingested.returncode == 1
    assert "'bad//id'" in ingested.stderr
    assert "nothing written" in ingested.stderr
    assert exported.returncode == 1  # the first two batches of 10 were written before


def test_an_export_writes_through_a_symlink_and_into_a_pipe_without_replacing_them(data_dirs, tmp_path) -> None:
    source, _ = data_dirs
    assert run_cli("ingest", str(NOTES), "--project", PROJECT, data_dir=source).returncode == 0
    target, link = tmp_path / "backups" / "notes.jsonl", tmp_path / "latest.jsonl"
    target.parent.mkdir()
    target.write_text("old\n")
    link.symlink_to(target)

    exported = run_cli("export", "--project", PROJECT, "--output", str(link), data_dir=source)

    assert exported.returncode == 0, exported.stderr
    assert link.is_symlink()  # renaming the finished file over it replaced the link and left the target old
    assert json.loads(target.read_text().splitlines()[-1])["kind"] == "end"
    assert not list(target.parent.glob(".*.partial"))

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with ThreadPoolExecutor(1) as reader:
        read = reader.submit(fifo.read_text)
        piped = run_cli("export", "--project", PROJECT, "--output", str(fifo), data_dir=source)
        text = read.result(timeout=120)
    assert piped.returncode == 0, piped.stderr
    assert text == target.read_text()
    assert stat.S_ISFIFO(fifo.stat().st_mode)


def read_indexed(url: str, *, timeout_s: float = 30.0) -> httpx.Response:
    """GET a document once the lexical index has it (until then its ETag is `"<version>-pending"`)."""
    deadline = time.monotonic() + timeout_s
    while True:
        response = httpx.get(url, timeout=30)
        if response.json()["lexically_indexed"] or time.monotonic() > deadline:
            return response
        time.sleep(0.1)


def test_an_etag_read_before_a_move_still_names_the_same_content_after_it(
    data_dirs, tmp_path, poimen_data_dir: Path, poimen_service: Callable[..., ServiceProcess]
) -> None:
    # Versions counted from 1 again in the new installation: a few writes there, and the version a client had
    # read before the move named other content; its If-Match would have overwritten that content unseen.
    source, _ = data_dirs
    export_file = tmp_path / "moved.jsonl"
    before = poimen_service(data_dir=source)
    for edit in range(4):
        written = httpx.post(
            f"{before.url}/v1/projects/{PROJECT}/documents", json={"id": "runbook", "text": f"edit {edit}"}, timeout=60
        )
        assert written.status_code == (201 if edit == 0 else 200), written.text
    read_before = read_indexed(f"{before.url}/v1/projects/{PROJECT}/documents/runbook").headers["etag"]
    assert before.stop() == 0
    assert run_cli("export", "--project", PROJECT, "--output", str(export_file), data_dir=source).returncode == 0
    imported = run_cli("import", str(export_file), data_dir=poimen_data_dir)
    after = poimen_service(data_dir=poimen_data_dir)
    documents = f"{after.url}/v1/projects/{PROJECT}/documents"

    moved = read_indexed(f"{documents}/runbook")
    versions = []
    while not versions or versions[-1] <= int(read_before.strip('"')):
        written = httpx.post(documents, json={"id": "runbook", "text": f"after the move {len(versions)}"}, timeout=60)
        assert written.status_code == 200, written.text  # the imported document, updated
        versions.append(written.json()["documents"][0]["version"])
    stale = httpx.post(
        documents, json={"id": "runbook", "text": "edit 4"}, headers={"If-Match": read_before}, timeout=60
    )

    assert imported.returncode == 0, imported.stderr
    assert moved.headers["etag"] == read_before  # the same content under the same ETag
    assert len(versions) == 1  # every version written after the move is past the one read before it
    assert stale.status_code == 409, stale.text
