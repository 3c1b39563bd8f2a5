"""The `poimen` command line stopped part-way by Ctrl-C (SIGINT) or SIGTERM, run for real in subprocesses."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from typing import TYPE_CHECKING

import pytest

from tests.integration.conftest import cli_environment, fresh_data_dir, poimen_executable, run_cli
from tests.integration.test_transfer_cli import NOTES, PROJECT, renamed

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

pytestmark = [pytest.mark.slow, pytest.mark.integration]

COPIES = 1500  # enough documents that an export is still writing when the signal comes


@pytest.fixture(scope="module")
def many_documents_original(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A data folder holding the notes and `COPIES` copies of one, imported (nothing embedded but the notes).

    Built once per module: three CLI runs and 1,500 imported documents took longer than the tests themselves.
    """
    work = tmp_path_factory.mktemp("many-documents")
    export_file, copies_file = work / "notes.jsonl", work / "copies.jsonl"
    with fresh_data_dir() as data_dir:
        assert run_cli("ingest", str(NOTES), "--project", PROJECT, data_dir=data_dir).returncode == 0
        exported = run_cli("export", "--project", PROJECT, "--output", str(export_file), data_dir=data_dir)
        assert exported.returncode == 0, exported.stderr
        header, record = export_file.read_text().splitlines()[:2]
        copies = [json.dumps(renamed(json.loads(record), f"copy-{number}.md")) for number in range(COPIES)]
        end = json.dumps({"kind": "end", "documents": COPIES})
        copies_file.write_text("\n".join([header, *copies, end]) + "\n")
        imported = run_cli("import", str(copies_file), data_dir=data_dir)
        assert imported.returncode == 0, imported.stderr
        yield data_dir


@pytest.fixture
def many_documents(many_documents_original: Path, poimen_data_dir: Path) -> Path:
    """`poimen_data_dir` as a copy of `many_documents_original`, its stopped PostgreSQL included.

    `cp -a` keeps the owner: as root the PostgreSQL files belong to the `pgserver` user that runs the server.
    """
    subprocess.run(["cp", "-a", str(many_documents_original), str(poimen_data_dir)], check=True)
    return poimen_data_dir


@pytest.mark.parametrize(("signal_number", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_export_stopped_part_way_leaves_no_partial_file(
    many_documents: Path, tmp_path: Path, signal_number: int, status: int
) -> None:
    # The partial file stayed beside the output after a Ctrl-C: a hidden, cut-off export in the backup folder.
    output = tmp_path / "backup.jsonl"
    partial = tmp_path / ".backup.jsonl.partial"
    process = subprocess.Popen(
        [poimen_executable(), "export", "--project", PROJECT, "--output", str(output)],
        cwd=many_documents.parent,
        env=cli_environment(many_documents),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # A shell's background job ignores SIGINT, and a child inherits that: as at a terminal instead.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # noqa: PLW1509 - no threads started yet
    )
    while not partial.exists() and process.poll() is None:
        time.sleep(0.01)  # the export has started writing once its partial file is there

    process.send_signal(signal_number)
    _, stderr = process.communicate(timeout=60)

    assert process.returncode == status, stderr
    assert not partial.exists()
    assert not output.exists()
    assert "Traceback" not in stderr
