"""A polled settings file: an edit in place is taken only once a later poll reads it unchanged."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.search.settled_files import FileState, SettledFile

if TYPE_CHECKING:
    from pathlib import Path


def test_a_file_renamed_into_place_is_taken_at_once_and_an_edit_in_place_at_the_next_poll(tmp_path: Path) -> None:
    path = tmp_path / "flags.yaml"
    path.write_text("a: 1\n")
    settled = SettledFile(path)
    first = settled.read(settled_digest=None)

    path.write_text("a: 2\n")  # the same inode, rewritten in place
    in_place = settled.read(settled_digest=first.digest)
    again = settled.read(settled_digest=first.digest)
    replacement = tmp_path / "next.yaml"
    replacement.write_text("a: 3\n")
    replacement.replace(path)  # another inode renamed over it
    renamed = settled.read(settled_digest=again.digest)

    assert [read.state for read in (first, in_place, again, renamed)] == [
        FileState.CHANGED,
        FileState.PENDING,
        FileState.CHANGED,
        FileState.CHANGED,
    ]
    assert (again.content, renamed.content) == (b"a: 2\n", b"a: 3\n")
    assert settled.read(settled_digest=renamed.digest).state is FileState.UNCHANGED


def test_a_missing_file_is_unreadable_with_one_digest_per_kind_of_error(tmp_path: Path) -> None:
    settled = SettledFile(tmp_path / "absent.yaml")

    reads = [settled.read(settled_digest=None) for _ in range(2)]

    assert {read.state for read in reads} == {FileState.UNREADABLE}
    assert reads[0].digest == reads[1].digest == "unreadable:FileNotFoundError"
    assert reads[0].error.startswith("cannot read:")
