"""The serve lock of a data folder: one holder at a time, named to the next; released, taken again."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pytest

from app.cli.serve_command import take_serve_lock
from app.cli.serve_lock import SERVE_LOCK_FILE, DataDirInUseError, ServeLock
from app.config import Settings

if TYPE_CHECKING:
    from pathlib import Path


def test_a_held_lock_refuses_another_holder_naming_the_holders_pid(tmp_path: Path) -> None:
    holder = ServeLock(tmp_path)
    holder.acquire()

    with pytest.raises(DataDirInUseError) as refused:
        ServeLock(tmp_path).acquire()

    assert refused.value.holder_pid == os.getpid()
    assert f"in use by poimen serve (pid {os.getpid()})" in str(refused.value)
    assert str(tmp_path) in str(refused.value)
    holder.release()


def test_a_released_lock_is_taken_again_over_the_stale_pid_file(tmp_path: Path) -> None:
    (tmp_path / SERVE_LOCK_FILE).write_text("999999999\n", encoding="ascii")  # a killed holder's file
    first = ServeLock(tmp_path)
    first.acquire()
    first.release()
    second = ServeLock(tmp_path)

    second.acquire()

    assert (tmp_path / SERVE_LOCK_FILE).read_text(encoding="ascii") == f"{os.getpid()}\n"
    second.release()
    second.release()  # idempotent


def test_a_holder_that_has_not_written_its_pid_yet_is_still_refused(tmp_path: Path) -> None:
    holder = ServeLock(tmp_path)
    holder.acquire()
    (tmp_path / SERVE_LOCK_FILE).write_text("", encoding="ascii")

    with pytest.raises(DataDirInUseError) as refused:
        ServeLock(tmp_path).acquire()

    assert refused.value.holder_pid is None
    assert "in use by another poimen serve" in str(refused.value)
    holder.release()


@pytest.mark.parametrize(
    ("environment", "refused"),
    [
        ({}, True),
        ({"DATABASE_URL": "postgresql://u:p@db.internal:5432/poimen"}, True),  # tantivy is still in the folder
        # Replicas on one embedded PostgreSQL and one OpenSearch (../shared/checks/replicas) share the folder.
        ({"OPENSEARCH_URL": "http://127.0.0.1:9200"}, False),
        (
            {"DATABASE_URL": "postgresql://u:p@db.internal:5432/poimen", "OPENSEARCH_URL": "http://127.0.0.1:9200"},
            False,
        ),
    ],
)
def test_only_a_server_with_the_embedded_lexical_index_is_refused_a_held_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, environment: dict[str, str], *, refused: bool
) -> None:
    for name in ("DATABASE_URL", "OPENSEARCH_URL"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("POIMEN_DATA_DIR", str(tmp_path))
    holder = ServeLock(tmp_path)
    holder.acquire()

    reason = take_serve_lock(ServeLock(tmp_path), Settings(_env_file=None))

    assert (reason is not None) is refused
    holder.release()
