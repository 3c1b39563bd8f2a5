"""The `poimen` command line on the paths and files a laptop has: spaces, quotes, letters beyond ASCII, other encodings."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.integration.conftest import free_port, run_cli, stop_leftover_postgres

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = [pytest.mark.slow, pytest.mark.integration]

NOTES = Path(__file__).resolve().parents[1] / "fixtures" / "notes"


@pytest.fixture
def spaced_data_dir(poimen_data_dir: Path) -> Iterator[Path]:
    """A POIMEN_DATA_DIR under a folder named as people name them ("My Notes"), beside `poimen_data_dir`."""
    data_dir = poimen_data_dir.parent / "Poimen's notes ü" / "data"
    data_dir.parent.mkdir()
    yield data_dir
    stop_leftover_postgres(data_dir)


def test_a_data_dir_whose_path_has_spaces_and_quotes_starts_the_embedded_database(spaced_data_dir: Path) -> None:
    # The default is ./.poimen: run from "~/My Projects/poimen" it was a path with a space, and PostgreSQL never
    # started ("postgres: invalid argument"), after four tries and a traceback.

    result = run_cli("migrate", data_dir=spaced_data_dir)

    assert result.returncode == 0, result.stderr
    assert "schema at head" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_data_dir_whose_path_a_shell_would_expand_is_refused_in_one_line_and_runs_nothing(tmp_path: Path) -> None:
    # pg_ctl starts postgres through /bin/sh with -D and -l in double quotes: `$HOME` was expanded (the log went
    # to ".../notes /root q/...") and a backquoted word ran as a command (as the `pgserver` user, in a folder it
    # may not write: "touch: Permission denied"), four times, then "cannot use .../postgres/log", after initdb.
    parent = tmp_path / 'notes $HOME "q" `touch ran`'
    parent.mkdir()
    data_dir = parent / "data"

    ingested = run_cli("ingest", str(NOTES), "--project", "p", data_dir=data_dir)

    last_line = ingested.stderr.splitlines()[-1]
    assert ingested.returncode == 1, ingested.stderr
    assert last_line.startswith(f"poimen ingest: the embedded PostgreSQL cannot use {data_dir / 'postgres'}: its path")
    assert 'holds $ ` ", which' in last_line
    assert "choose a POIMEN_DATA_DIR" in last_line
    assert "set DATABASE_URL" in last_line
    assert "Traceback" not in ingested.stderr
    assert not (data_dir / "postgres").exists()


def test_serve_on_a_data_dir_whose_path_a_shell_would_expand_is_refused_as_the_other_commands_are(
    tmp_path: Path,
) -> None:
    # The other commands refuse such a path before anything starts; `poimen serve` bound the port, exported the
    # model into the folder and then exited 3 on "application start-up failed: EngineUnavailableError: ...".
    parent = tmp_path / 'notes $HOME "q" `touch ran`'
    parent.mkdir()
    data_dir = parent / "data"

    served = run_cli("serve", "--host", "127.0.0.1", "--port", str(free_port()), data_dir=data_dir)
    ingested = run_cli("ingest", str(NOTES), "--project", "p", data_dir=data_dir)

    assert served.returncode == 2, served.stderr  # as every other data folder serve cannot use
    errors = [json.loads(line)["message"] for line in served.stderr.splitlines() if '"ERROR"' in line]
    assert errors == [ingested.stderr.splitlines()[-1].removeprefix("poimen ingest: ")], served.stderr
    assert errors[0].startswith(f"the embedded PostgreSQL cannot use {data_dir / 'postgres'}: its path holds $")
    assert "Traceback" not in served.stderr
    assert not (data_dir / "models").exists()  # refused before the model was loaded (or exported)
    assert not (data_dir / "postgres").exists()


def test_a_corpus_that_is_not_utf8_is_refused_naming_its_file_and_line(tmp_path: Path) -> None:
    # Both said only "'utf-8' codec can't decode byte 0xe9 in position 23: invalid continuation byte".
    dataset = tmp_path / "latin1-set"
    (dataset / "qrels").mkdir(parents=True)
    corpus = dataset / "corpus.jsonl"
    latin1_line = b'{"_id": "d2", "text": "caf\xe9 notes"}'
    corpus.write_bytes(b'{"_id": "d1", "text": "fine"}\n' + latin1_line + b"\n")
    (dataset / "queries.jsonl").write_text('{"_id": "q1", "text": "cafe"}\n', encoding="utf-8")
    (dataset / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td2\t1\n", encoding="utf-8")
    data_dir = tmp_path / "data"

    ingested = run_cli("ingest", str(corpus), "--project", "p", data_dir=data_dir)
    evaluated = run_cli("eval", "--dataset", str(dataset), data_dir=data_dir)

    expected = f"{corpus}:2: not valid UTF-8 (first at byte offset {latin1_line.index(0xE9)})"
    assert ingested.returncode == 1, ingested.stderr
    assert f"cannot ingest {corpus}: {expected}; nothing written" in ingested.stderr
    assert evaluated.returncode == 2, evaluated.stderr
    assert expected in evaluated.stderr
    assert not data_dir.exists()


def test_an_embedded_database_that_cannot_start_is_one_line_naming_its_log(poimen_data_dir: Path) -> None:
    # A damaged folder (a restore cut short: PG_VERSION and nothing else), a full disk, a read-only one: four
    # tries, then a CalledProcessError traceback of pg_ctl's command line.
    cluster = poimen_data_dir / "postgres"
    cluster.mkdir(parents=True)
    (cluster / "PG_VERSION").write_text("18\n", encoding="utf-8")

    result = run_cli("migrate", data_dir=poimen_data_dir)

    assert result.returncode == 1, result.stderr
    assert result.stderr.splitlines()[-1].startswith(
        f"poimen migrate: the embedded PostgreSQL under {cluster} did not start ("
    )
    assert f"its log: {cluster / 'log'}" in result.stderr.splitlines()[-1]
    assert "Traceback" not in result.stderr
