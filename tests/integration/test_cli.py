"""The `poimen` command line, run for real in subprocesses on a temporary POIMEN_DATA_DIR."""

from __future__ import annotations

import json
import os
import pty
import select
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from app.engines.tantivy_schema import SCHEMA_VERSION, SCHEMA_VERSION_FILE
from tests.integration.conftest import cli_environment, free_port, poimen_executable, run_cli

if TYPE_CHECKING:
    from collections.abc import Callable

    from tests.integration.conftest import ServiceProcess

pytestmark = [pytest.mark.slow, pytest.mark.integration]

NOTES = Path(__file__).resolve().parents[1] / "fixtures" / "notes"
PROJECT = "notes"


def lexical_documents(service: ServiceProcess, query: str) -> list[str]:
    response = httpx.post(
        f"{service.url}/v1/search", json={"query": query, "project": PROJECT, "strategy": "lexical"}, timeout=30.0
    )
    assert response.status_code == 200, response.text
    return [hit["document_id"] for hit in response.json()["results"]]


def test_ingest_reindex_migrate_then_serve_the_notes(
    poimen_service: Callable[..., ServiceProcess], poimen_data_dir: Path, tmp_path: Path
) -> None:
    notes = shutil.copytree(NOTES, tmp_path / "notes")
    (notes / "empty.md").write_text(" \n", encoding="utf-8")
    secret = tmp_path / "secret.md"
    secret.write_text("a password outside the folder", encoding="utf-8")
    (notes / "linked.md").symlink_to(secret)
    (notes / "latin1.txt").write_bytes("Caf\u00e9 notes saved by an old editor".encode("latin-1"))
    # As in a container: no XDG session (the embedded PostgreSQL's wheel warned on every command), and a
    # first start that exports the model (its library drew a "Loading weights" bar).
    first_start = {"XDG_RUNTIME_DIR": "", "EMBEDDING_ONNX_DIR": str(tmp_path / "onnx")}
    ingested = run_cli("ingest", str(notes), "--project", PROJECT, data_dir=poimen_data_dir, **first_start)
    # Losing the lexical index entirely: PostgreSQL still has everything (every start refills it; `reindex` too).
    shutil.rmtree(poimen_data_dir / "lexical")
    reindexed = run_cli("reindex", "--project", PROJECT, data_dir=poimen_data_dir)
    migrated = run_cli("migrate", data_dir=poimen_data_dir)
    service = poimen_service(poimen_data_dir)

    document = httpx.get(f"{service.url}/v1/projects/{PROJECT}/documents/runbooks/port-forwarding.md", timeout=30.0)
    oversized_head = httpx.get(f"{service.url}/v1/projects", headers={"X-Padding": "x" * 100_000}, timeout=30.0)

    assert ingested.returncode == 0, ingested.stderr
    # stderr is a pipe here, as in CI: no progress bar, whose "\r" redraws filled the logs (text mode reads each
    # "\r" as a line end, so the bar's label is what is looked for); the summary line stays.
    assert "ingest notes" not in ingested.stderr
    assert "5 created, 0 updated, 0 unchanged" in ingested.stderr
    latin1 = notes / "latin1.txt"
    assert f"warning: {latin1}: not valid UTF-8 (first at byte offset 3): read with U+FFFD" in ingested.stderr
    assert "XDG_RUNTIME_DIR" not in ingested.stderr
    assert "Loading weights" not in ingested.stderr  # the model library's bar; the command's own stays
    assert f"skipped {notes / 'empty.md'}: no text" in ingested.stderr
    assert f"skipped {notes / 'linked.md'}: a symlink (not followed)" in ingested.stderr
    assert "; 2 skipped" in ingested.stderr
    assert reindexed.returncode == 0, reindexed.stderr
    assert "5 documents queued" in reindexed.stderr
    assert migrated.returncode == 0, migrated.stderr
    assert "schema at head" in migrated.stderr
    assert document.status_code == 200, document.text
    assert oversized_head.status_code == 431  # `poimen serve` runs the head-limited protocol
    body = document.json()
    assert body["title"] == "Port forwarding"
    assert body["tags"] == ["networking", "kubernetes"]
    breadcrumbs = [chunk["breadcrumb"] for chunk in body["chunks"]]
    assert ["Port forwarding", "Kubernetes networking", "Port conflicts"] in breadcrumbs
    assert lexical_documents(service, "platypus checklist")[:1] == ["runbooks/backups.md"]
    assert lexical_documents(service, "retrospective")[:1] == ["meeting.txt"]


def test_a_query_after_a_lexical_format_upgrade_indexes_again_before_searching(
    poimen_data_dir: Path, tmp_path: Path
) -> None:
    notes = shutil.copytree(NOTES, tmp_path / "notes")
    ingested = run_cli("ingest", str(notes), "--project", PROJECT, data_dir=poimen_data_dir)
    assert ingested.returncode == 0, ingested.stderr
    # As a version whose folder is rebuilt left it: it is emptied at open, and no server runs to refill it.
    version_file = poimen_data_dir / "lexical" / SCHEMA_VERSION_FILE
    version_file.write_text("5\n", encoding="ascii")

    queried = run_cli(
        "query", "platypus checklist", "--project", PROJECT, "--strategy", "lexical", "--json", data_dir=poimen_data_dir
    )

    assert queried.returncode == 0, queried.stderr
    assert "lexical index format upgraded: 1 project(s) queued" in queried.stderr
    assert "lexical index up to date (4 queued documents indexed, of any project)" in queried.stderr
    assert json.loads(queried.stdout.splitlines()[0])["results"][0]["document_id"] == "runbooks/backups.md"
    assert version_file.read_text(encoding="ascii").strip() == str(SCHEMA_VERSION)


def test_invalid_environment_value_stops_serve_with_one_line_naming_it(poimen_data_dir: Path) -> None:
    result = run_cli("serve", "--port", "9", data_dir=poimen_data_dir, timeout_s=60.0, RRF_K_CONSTANT="abc")

    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "RRF_K_CONSTANT" in lines[0]
    assert not poimen_data_dir.exists()  # stopped before touching any engine


def test_a_bad_query_vocabulary_stops_serve_and_query_with_one_line_naming_the_entry(
    poimen_data_dir: Path, tmp_path: Path
) -> None:
    vocabulary = tmp_path / "vocabulary.json"
    vocabulary.write_text('{"abbreviations": {"load balancer": "lb"}}', encoding="utf-8")
    environment = {"QUERY_VOCABULARY_PATH": str(vocabulary)}

    served = run_cli("serve", "--port", "9", data_dir=poimen_data_dir, timeout_s=60.0, **environment)
    queried = run_cli("query", "lb", "--project", PROJECT, data_dir=poimen_data_dir, timeout_s=60.0, **environment)

    for result in (served, queried):
        assert result.returncode == 2, result.stderr
        [line] = result.stderr.strip().splitlines()
        assert (
            line == f"QUERY_VOCABULARY_PATH {vocabulary}: abbreviations['load balancer']: not one word as queries "
            "are split (letters and digits, joined by . / + ' & -)"
        )
    assert not poimen_data_dir.exists()  # stopped before touching any engine


def test_a_shared_database_without_opensearch_is_refused_with_one_line(poimen_data_dir: Path) -> None:
    external = "postgresql://poimen@127.0.0.1:9/poimen"  # never reached: refused before any engine opens

    served = run_cli("serve", "--port", "9", data_dir=poimen_data_dir, timeout_s=60.0, DATABASE_URL=external)
    ingested = run_cli("ingest", str(NOTES), "--project", PROJECT, data_dir=poimen_data_dir, DATABASE_URL=external)
    queried = run_cli("query", "x", "--project", PROJECT, data_dir=poimen_data_dir, DATABASE_URL=external)
    evaluated = run_cli("eval", "--dataset", str(NOTES), data_dir=poimen_data_dir, DATABASE_URL=external)

    for result in (served, ingested, queried, evaluated):
        assert result.returncode == 2
        [line] = result.stderr.strip().splitlines()
        assert "DATABASE_URL" in line
        assert "OPENSEARCH_URL" in line
    assert not poimen_data_dir.exists()


def test_a_reader_that_stops_early_ends_the_command_without_a_traceback(poimen_data_dir: Path) -> None:
    # `poimen query ... --json | head -1`: the reader is gone before the first line is written.
    process = subprocess.Popen(
        [poimen_executable(), "query", "ports", "--project", PROJECT, "--json"],
        cwd=poimen_data_dir.parent,
        env=cli_environment(poimen_data_dir),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    process.stdout.close()
    _, errors = process.communicate(timeout=180)

    assert process.returncode == 1, errors
    assert "Traceback" not in errors
    assert "BrokenPipeError" not in errors


def test_migrate_against_an_unreachable_database_fails_in_one_line(poimen_data_dir: Path) -> None:
    # The migration Job's log: nothing listens on the discard port.
    result = run_cli("migrate", data_dir=poimen_data_dir, DATABASE_URL="postgresql://app:secretpw@127.0.0.1:9/app")

    assert result.returncode == 1, result.stderr
    assert result.stderr.startswith("poimen migrate: postgresql failed: ConnectionRefusedError"), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "secretpw" not in result.stderr


def test_python_dash_m_app_prints_help_with_every_command(poimen_data_dir: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "app", "--help"],
        env=cli_environment(poimen_data_dir),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert result.returncode == 0, result.stderr
    for command in ("serve", "migrate", "ingest", "reindex"):
        assert command in result.stdout


def test_migrate_never_imports_torch_or_the_model(poimen_data_dir: Path) -> None:
    probe = (
        "import sys; from app.cli.main import main; status = main(['migrate']); "
        "heavy = sorted(name for name in ('torch', 'sentence_transformers', 'transformers') if name in sys.modules); "
        "print('heavy=' + ','.join(heavy)); sys.exit(status)"
    )

    result = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=Path(__file__).resolve().parents[2],
        env=cli_environment(poimen_data_dir),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "heavy="
    assert "schema at head (384-dimension embeddings)" in result.stderr


def test_serve_on_a_terminal_greets_with_a_few_readable_lines(poimen_data_dir: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    controller, terminal = pty.openpty()
    poimen_data_dir.parent.mkdir(parents=True, exist_ok=True)
    process = subprocess.Popen(
        [sys.executable, "-m", "app", "serve", "--port", str(port)],
        cwd=poimen_data_dir.parent,  # not the checkout: its .env must not leak into the run
        env=cli_environment(poimen_data_dir),
        stdin=terminal,
        stdout=terminal,
        stderr=terminal,
    )
    os.close(terminal)
    screen = b""
    try:
        deadline = time.monotonic() + 120
        while b"is ready at" not in screen and time.monotonic() < deadline and process.poll() is None:
            if select.select([controller], [], [], 0.5)[0]:
                screen += os.read(controller, 65536)
        time.sleep(0.5)
        while select.select([controller], [], [], 0.2)[0]:
            screen += os.read(controller, 65536)
    finally:
        process.terminate()
        process.wait(30)
        os.close(controller)
    text = screen.decode(errors="replace")

    assert f"Poimen Memory Search is ready at http://127.0.0.1:{port}" in text, text
    assert "auth   off (loopback only)" in text
    assert "curl -s" in text
    assert '{"timestamp"' not in text  # plain text on a terminal, JSON stays the default elsewhere
    assert "initdb" not in text
    assert "Loading weights" not in text
    assert len(text.splitlines()) < 15


def test_serve_on_a_port_in_use_says_so_before_starting_anything(poimen_data_dir: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]

        result = run_cli("serve", "--port", str(port), data_dir=poimen_data_dir, timeout_s=60.0)

    assert result.returncode == 1
    last = json.loads(result.stderr.strip().splitlines()[-1])  # not a terminal: JSON lines from the first
    assert last["level"] == "ERROR"
    assert last["message"].startswith(f"cannot serve on 127.0.0.1:{port}: ")
    assert not (poimen_data_dir / "postgres").exists()  # refused before the engines (and the model) started


def test_serve_refuses_an_empty_host_instead_of_serving_elsewhere(poimen_data_dir: Path) -> None:
    # `--host "$HOST"` with HOST unset served on POIMEN_HOST (127.0.0.1) in silence: accepted and ignored.
    with socket.socket() as taken:  # were the empty host taken as POIMEN_HOST, it would fail on this port instead
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]

        result = run_cli("serve", "--host", "", "--port", str(port), data_dir=poimen_data_dir)

    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines()[-1] == (
        "poimen serve: error: argument --host: '' is not a host: give an address (127.0.0.1, 0.0.0.0, ::) or a name"
    )
    assert not poimen_data_dir.exists()


def test_a_query_of_a_project_that_holds_nothing_says_so(poimen_data_dir: Path) -> None:
    assert run_cli("ingest", str(NOTES), "--project", PROJECT, data_dir=poimen_data_dir).returncode == 0

    queried = run_cli("query", "platypus checklist", "--project", "nots", data_dir=poimen_data_dir)
    reindexed = run_cli("reindex", "--project", "nots", data_dir=poimen_data_dir)

    assert queried.returncode == 1, queried.stderr  # as reindex: a script must not read a typo as "no hits"
    assert f"project 'nots' holds no documents (projects: {PROJECT})" in queried.stderr
    assert reindexed.returncode == 1
    assert "project 'nots' holds no documents; nothing to reindex" in reindexed.stderr


def test_a_refused_query_among_several_is_named_and_the_others_still_run(poimen_data_dir: Path) -> None:
    assert run_cli("ingest", str(NOTES), "--project", PROJECT, data_dir=poimen_data_dir).returncode == 0

    queried = run_cli("query", "", "platypus checklist", "--project", PROJECT, "--json", data_dir=poimen_data_dir)

    assert queried.returncode == 1
    assert "'': query must not be empty" in queried.stderr
    answers = [json.loads(line) for line in queried.stdout.splitlines()]
    assert [answer["query"] for answer in answers] == ["platypus checklist"]


def test_engines_that_cannot_be_reached_are_one_line_not_a_traceback(poimen_data_dir: Path) -> None:
    unreachable = {"DATABASE_URL": "postgresql://poimen@127.0.0.1:9/poimen", "OPENSEARCH_URL": "http://127.0.0.1:9"}

    exported = run_cli("export", "--project", PROJECT, data_dir=poimen_data_dir, **unreachable)

    assert exported.returncode == 1
    [line] = exported.stderr.strip().splitlines()
    assert line.startswith("poimen export: ")
    assert "Traceback" not in exported.stderr


def test_reading_commands_on_a_data_dir_that_holds_nothing_create_nothing(tmp_path: Path) -> None:
    typo = tmp_path / "typo"

    results = [
        run_cli("query", "anything", "--project", PROJECT, data_dir=typo),
        run_cli("export", "--project", PROJECT, "--output", str(tmp_path / "out.jsonl"), data_dir=typo),
        run_cli("reindex", "--project", PROJECT, data_dir=typo),
    ]

    for result in results:
        assert result.returncode == 1, result.stderr
        assert result.stderr.strip() == (
            f"no data under {typo} (POIMEN_DATA_DIR): nothing was ingested there; check the folder, or ingest first"
        )
    assert not typo.exists()  # a mistyped folder used to get a whole new database
    assert not (tmp_path / "out.jsonl").exists()
    (typo / "postgres").mkdir(parents=True)  # an empty cluster folder holds nothing either
    empty = run_cli("query", "anything", "--project", PROJECT, data_dir=typo)
    assert empty.returncode == 1, empty.stderr
    assert list((typo / "postgres").iterdir()) == []


def test_an_import_refused_for_its_file_creates_no_data_dir(tmp_path: Path) -> None:
    fresh = tmp_path / "fresh"
    bad = tmp_path / "cut.jsonl"
    bad.write_text('{"kind": "header", "format_version": 2}\n', encoding="utf-8")

    result = run_cli("import", str(bad), data_dir=fresh)

    assert result.returncode == 2, result.stderr
    assert "import refused, nothing written" in result.stderr
    assert not fresh.exists()  # checked before any engine started: no database made to refuse a file


def test_ingest_holds_max_document_bytes_and_refuses_unwritable_text_in_one_line(tmp_path: Path) -> None:
    # Only the API held the limit: a 10 MB log in a notes folder was embedded for minutes.
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "small.md").write_text("a short note", encoding="utf-8")
    (notes / "huge.log.md").write_text("x" * 400, encoding="utf-8")
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"_id": "1", "text": "fine"}\n{"_id": "2", "text": "a lone \\ud800 surrogate"}\n')
    data_dir = tmp_path / "data"

    oversized = run_cli("ingest", str(notes), "--project", PROJECT, data_dir=data_dir, MAX_DOCUMENT_BYTES="300")
    surrogate = run_cli("ingest", str(corpus), "--project", PROJECT, data_dir=data_dir)

    assert oversized.returncode == 1, oversized.stderr
    assert "document 'huge.log.md' is 400 bytes (text and metadata); the limit is 300" in oversized.stderr
    assert "nothing written" in oversized.stderr
    assert surrogate.returncode == 1, surrogate.stderr
    assert "lone surrogate" in surrogate.stderr
    for result in (oversized, surrogate):
        assert "Traceback" not in result.stderr
    assert not data_dir.exists()  # refused before any engine started


@pytest.fixture
def run_on_a_data_dir_under_a_file(tmp_path: Path) -> Callable[..., subprocess.CompletedProcess[str]]:
    """`run(*arguments)`: `poimen ARGUMENTS` with POIMEN_DATA_DIR at `tmp_path/a-file/data`, under a file."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder", encoding="utf-8")

    def run(*arguments: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [poimen_executable(), *arguments],
            cwd=tmp_path,  # not the data dir's parent (run_cli's): that is the file
            env=cli_environment(blocker / "data"),
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )

    return run


def test_a_data_dir_under_a_file_is_one_line_naming_it(
    run_on_a_data_dir_under_a_file: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    result = run_on_a_data_dir_under_a_file("ingest", str(NOTES), "--project", PROJECT)

    assert result.returncode == 1, result.stderr
    assert f"poimen ingest: cannot use {tmp_path / 'a-file' / 'data'}: Not a directory" in result.stderr
    assert "Traceback" not in result.stderr


def test_serve_on_a_data_dir_it_cannot_write_says_so_in_one_line_before_starting_anything(
    run_on_a_data_dir_under_a_file: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    result = run_on_a_data_dir_under_a_file("serve", "--host", "127.0.0.1", "--port", str(free_port()))

    assert result.returncode == 2, result.stderr  # was 3, after the model had loaded: uvicorn's start-up failure
    errors = [json.loads(line) for line in result.stderr.splitlines() if '"ERROR"' in line]
    expected = (
        f"cannot use POIMEN_DATA_DIR {tmp_path / 'a-file' / 'data'}: Not a directory;"
        " make it a folder this user can write, or set POIMEN_DATA_DIR to one"
    )
    assert [error["message"] for error in errors] == [expected]
    assert "Traceback" not in result.stderr


def test_serve_on_a_data_dir_whose_postgres_folder_is_a_file_says_so_in_one_line_before_starting_anything(
    tmp_path: Path,
) -> None:
    # The check looked into `postgres` only when it was a folder: a file there passed, the model loaded, the port
    # was bound, and the start-up failed on ".../postgres/.handle_pids.json: Not a directory", exit 3.
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / "postgres").write_text("not a folder", encoding="utf-8")

    served = run_cli("serve", "--host", "127.0.0.1", "--port", str(free_port()), data_dir=data_dir)

    assert served.returncode == 2, served.stderr
    errors = [json.loads(line)["message"] for line in served.stderr.splitlines() if '"ERROR"' in line]
    expected = (
        f"cannot use POIMEN_DATA_DIR {data_dir / 'postgres'}: Not a directory (a file has its name);"
        " make it a folder this user can write, or set POIMEN_DATA_DIR to one"
    )
    assert errors == [expected]
    assert not (data_dir / "models").exists()  # refused before the model was loaded (or exported)


def test_commands_on_a_data_dir_whose_postgres_folder_is_a_file_name_that_file(tmp_path: Path) -> None:
    # serve named the folder; migrate, ingest and import said "cannot use .../postgres/.handle_pids.json: Not a
    # directory", a file nobody made, inside the file that is in the way.
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / "postgres").write_text("not a folder", encoding="utf-8")

    migrated = run_cli("migrate", data_dir=data_dir)
    ingested = run_cli("ingest", str(NOTES), "--project", PROJECT, data_dir=data_dir)

    for command, result in (("migrate", migrated), ("ingest", ingested)):
        assert result.returncode == 1, result.stderr
        last_line = result.stderr.splitlines()[-1]
        assert (
            last_line == f"poimen {command}: cannot use {data_dir / 'postgres'}: Not a directory (a file has its name)"
        )
        assert "Traceback" not in result.stderr


def test_commands_that_read_a_data_dir_that_is_a_file_say_so_as_the_writers_do(tmp_path: Path) -> None:
    # query, export and reindex said "no data under ...: nothing was ingested there; check the folder, or ingest
    # first", and the ingest it advised then failed on "cannot use ...: Not a directory (a file has its name)".
    data_file = tmp_path / "data-file"
    data_file.write_text("not a folder", encoding="utf-8")
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / "postgres").write_text("not a folder", encoding="utf-8")

    queried = run_cli("query", "--project", PROJECT, "hello", data_dir=data_file)
    exported = run_cli("export", "--project", PROJECT, data_dir=data_dir)
    reindexed = run_cli("reindex", "--project", PROJECT, data_dir=data_dir)

    for command, result, path in (
        ("query", queried, data_file),
        ("export", exported, data_dir / "postgres"),
        ("reindex", reindexed, data_dir / "postgres"),
    ):
        assert result.returncode == 1, result.stderr
        assert result.stderr.splitlines() == [
            f"poimen {command}: cannot use {path}: Not a directory (a file has its name)"
        ]


def test_a_data_dir_that_is_a_file_is_said_to_be_no_folder(tmp_path: Path) -> None:
    # mkdir's own words, "File exists", read as if the folder were fine.
    data_file = tmp_path / "data"
    data_file.write_text("not a folder", encoding="utf-8")

    ingested = run_cli("ingest", str(NOTES), "--project", PROJECT, data_dir=data_file)
    served = run_cli("serve", "--host", "127.0.0.1", "--port", str(free_port()), data_dir=data_file)

    assert ingested.returncode == 1, ingested.stderr
    assert f"poimen ingest: cannot use {data_file}: Not a directory (a file has its name)" in ingested.stderr
    assert served.returncode == 2, served.stderr
    assert f"cannot use POIMEN_DATA_DIR {data_file}: Not a directory (a file has its name);" in served.stderr
    for result in (ingested, served):
        assert "File exists" not in result.stderr


def test_ingest_of_a_path_without_documents_fails_and_creates_nothing(tmp_path: Path) -> None:
    # "0 created" with exit 0: a script took an unmounted (empty) notes volume for a good ingest.
    empty_folder = tmp_path / "empty"
    empty_folder.mkdir()
    skipped_only = tmp_path / "skipped"
    skipped_only.mkdir()
    (skipped_only / "blank.md").write_text(" \n", encoding="utf-8")
    empty_corpus = tmp_path / "corpus.jsonl"
    empty_corpus.write_text("", encoding="utf-8")
    data_dir = tmp_path / "data"

    results = {
        path: run_cli("ingest", str(path), "--project", PROJECT, data_dir=data_dir)
        for path in (empty_folder, skipped_only, empty_corpus)
    }

    for path, result in results.items():
        assert result.returncode == 1, result.stderr
        assert f"cannot ingest {path}: no documents to ingest there" in result.stderr
        assert "Traceback" not in result.stderr
    assert "(1 skipped)" in results[skipped_only].stderr
    assert not data_dir.exists()  # refused before any engine (or its database) was made


def test_a_misspelt_setting_is_named_with_the_one_it_probably_means(tmp_path: Path) -> None:
    result = run_cli("query", "hello", "--project", "p", data_dir=tmp_path / "data", HYBRID_ROLOUT_PERCENT="20")

    assert result.stderr.splitlines()[0] == (
        "warning: HYBRID_ROLOUT_PERCENT is not a setting and is ignored: did you mean HYBRID_ROLLOUT_PERCENT?"
    ), result.stderr


def test_query_reads_the_flags_file_and_the_reranker_as_the_server_does(poimen_data_dir: Path, tmp_path: Path) -> None:
    # `poimen query` searched with the environment's knobs alone and no second stage: with a flags file or
    # RERANKER set it answered other hits and scores than the API it says it searches as.
    assert run_cli("ingest", str(NOTES), "--project", PROJECT, data_dir=poimen_data_dir).returncode == 0
    flags = tmp_path / "flags.yaml"
    flags.write_text("search_strategy: lexical\nrrf_final_k: 2\n", encoding="utf-8")
    bad_flags = tmp_path / "bad-flags.yaml"
    bad_flags.write_text("rrf_final_k: 0\n", encoding="utf-8")

    def search(*options: str, **environment: str) -> subprocess.CompletedProcess[str]:
        return run_cli(
            "query", "port conflicts", "--project", PROJECT, "--json", *options, data_dir=poimen_data_dir, **environment
        )

    flagged = search(POIMEN_FLAGS_FILE=str(flags))
    asked = search("--limit", "3", "--strategy", "hybrid", POIMEN_FLAGS_FILE=str(flags))
    reranked = search(RERANKER="learned")
    refused = search(POIMEN_FLAGS_FILE=str(bad_flags))

    assert flagged.returncode == 0, flagged.stderr
    answer = json.loads(flagged.stdout)
    assert (answer["search_strategy"], len(answer["results"])) == ("Lexical", 2)
    answer = json.loads(asked.stdout)  # what the command line asks for wins over the file, as a request's does
    assert (answer["search_strategy"], len(answer["results"])) == ("Hybrid", 3)
    assert reranked.returncode == 0, reranked.stderr
    answer = json.loads(reranked.stdout)
    assert answer["results"]
    assert all(hit["rerank_score"] is not None for hit in answer["results"])
    assert answer["metrics"]["rerank_time_ms"] > 0
    # A flags file the server would not apply stops the command (the server starts on the environment's knobs
    # and logs it; a one-off search has no later reload to wait for).
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.count("\n") == 1, refused.stderr
    assert str(bad_flags) in refused.stderr
    assert "RRF_FINAL_K" in refused.stderr
    assert not refused.stdout
