from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import pytest

from app.domain.errors import InvalidInputError
from app.ingestion.sources import read_documents

if TYPE_CHECKING:
    from pathlib import Path


def write(path: Path, content: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def test_folder_yields_notes_recursively_in_path_order(tmp_path: Path) -> None:
    write(tmp_path / "runbooks" / "port-forward.md", "# Port forwarding\nUse kubectl.")
    write(tmp_path / "a.txt", "plain text note")
    write(tmp_path / "b.markdown", "No heading here.")
    write(tmp_path / "image.png", b"\x89PNG")

    documents = list(read_documents(tmp_path, project_id="p"))

    assert [(d.document_id, d.source, d.title) for d in documents] == [
        ("a.txt", "a.txt", "a"),
        ("b.markdown", "b.markdown", "b"),
        ("runbooks/port-forward.md", "runbooks/port-forward.md", "Port forwarding"),
    ]
    assert {d.project_id for d in documents} == {"p"}
    assert documents[2].text == "# Port forwarding\nUse kubectl."


def test_same_stem_with_different_extensions_stays_two_documents(tmp_path: Path) -> None:
    write(tmp_path / "note.md", "markdown")
    write(tmp_path / "note.txt", "text")

    assert [d.document_id for d in read_documents(tmp_path, project_id="p")] == ["note.md", "note.txt"]


def test_hidden_folders_and_files_are_skipped(tmp_path: Path) -> None:
    write(tmp_path / ".obsidian" / "workspace.md", "hidden")
    write(tmp_path / ".draft.md", "hidden")
    write(tmp_path / "visible.md", "shown")

    assert [d.document_id for d in read_documents(tmp_path, project_id="p")] == ["visible.md"]


def test_front_matter_gives_title_tags_date_and_metadata(tmp_path: Path) -> None:
    write(
        tmp_path / "n.md",
        "---\ntitle: Incident review\ntags: [ops, '#k8s']\ndate: 2024-05-01\nowner: sre\n---\n# Heading\nBody.",
    )

    (document,) = read_documents(tmp_path, project_id="p")

    assert document.title == "Incident review"
    assert document.tags == ("ops", "k8s")
    assert document.event_time == datetime(2024, 5, 1, tzinfo=UTC)
    assert document.metadata == {
        "title": "Incident review",
        "tags": ["ops", "#k8s"],
        "date": "2024-05-01",
        "owner": "sre",
    }


def test_informal_date_stays_in_metadata_only(tmp_path: Path) -> None:
    write(tmp_path / "n.md", "---\ndate: last spring\n---\nBody.")

    (document,) = read_documents(tmp_path, project_id="p")

    assert document.event_time is None
    assert document.metadata == {"date": "last spring"}


def test_empty_and_binary_files_are_skipped_and_reported(tmp_path: Path) -> None:
    write(tmp_path / "empty.md", "  \n")
    write(tmp_path / "front-only.md", "---\ntitle: x\n---\n")
    write(tmp_path / "binary.txt", b"ab\x00cd")
    write(tmp_path / "ok.md", "fine")
    skipped: list[tuple[str, str]] = []

    documents = list(read_documents(tmp_path, project_id="p", on_skip=lambda p, why: skipped.append((p.name, why))))

    assert [d.document_id for d in documents] == ["ok.md"]
    assert sorted(name for name, _ in skipped) == ["binary.txt", "empty.md", "front-only.md"]


def test_a_named_pipe_and_a_path_not_in_utf8_are_skipped_and_reported(tmp_path: Path) -> None:
    write(tmp_path / "ok.md", "fine")
    os.mkfifo(tmp_path / "pipe.md")  # reading it would block the ingest forever
    undecodable = os.fsdecode(b"caf\xe9.md")  # a Latin-1 file name: its id would not be UTF-8 text
    write(tmp_path / undecodable, "text")
    skipped: list[tuple[str, str]] = []

    documents = list(read_documents(tmp_path, project_id="p", on_skip=lambda p, why: skipped.append((p.name, why))))

    assert [d.document_id for d in documents] == ["ok.md"]
    assert sorted(skipped) == sorted([("pipe.md", "not a regular file"), (undecodable, "its path is not valid UTF-8")])


def test_symlinked_files_below_a_folder_are_skipped_and_reported(tmp_path: Path) -> None:
    secret = write(tmp_path / "outside" / "secret.md", "a password")
    notes = tmp_path / "notes"
    write(notes / "ok.md", "fine")
    (notes / "secret.md").symlink_to(secret)
    (notes / "again.md").symlink_to(notes / "ok.md")
    write(tmp_path / "elsewhere" / "private.md", "another password")
    (notes / "linked-folder").symlink_to(tmp_path / "elsewhere")  # was skipped without a word
    skipped: list[tuple[str, str]] = []

    documents = list(read_documents(notes, project_id="p", on_skip=lambda p, why: skipped.append((p.name, why))))

    assert [d.document_id for d in documents] == ["ok.md"]
    assert sorted(skipped) == [
        ("again.md", "a symlink (not followed)"),
        ("linked-folder", "a symlinked folder (not followed)"),
        ("secret.md", "a symlink (not followed)"),
    ]


def test_bom_crlf_and_invalid_utf8_are_tolerated_and_the_replacement_is_reported(tmp_path: Path) -> None:
    write(tmp_path / "n.md", b"\xef\xbb\xbf# T\xc3\xa9l\xc3\xa9\r\nbad \xff byte\r\n")
    write(tmp_path / "valid.md", "# Caf\u00e9\n\nfine \ufffd already there")
    warned: list[tuple[str, str]] = []

    documents = list(read_documents(tmp_path, project_id="p", on_warning=lambda p, why: warned.append((p.name, why))))

    assert [document.title for document in documents] == ["Télé", "Café"]
    assert "bad \ufffd byte" in documents[0].text
    # The offset counts the BOM: it is where a hex view of the file shows the byte.
    assert warned == [
        ("n.md", "not valid UTF-8 (first at byte offset 17): read with U+FFFD for the bytes that do not decode")
    ]


def test_single_file_is_relative_to_its_folder(tmp_path: Path) -> None:
    path = write(tmp_path / "sub" / "one.md", "Body.")

    (document,) = read_documents(path, project_id="p")

    assert document.document_id == "one.md"


def test_beir_corpus_reads_ids_titles_and_metadata(tmp_path: Path) -> None:
    lines = [
        {"_id": "4983", "title": "Microstructure", "text": "Abstract.", "metadata": {"year": 2001}},
        {"_id": "77", "title": "Only a title", "text": ""},
        {"_id": "78", "title": "", "text": ""},
        {"_id": "79", "title": "T", "text": "Text.", "url": "http://x"},
        {"_id": "80", "text": "Null metadata.", "metadata": None},
    ]
    corpus = write(tmp_path / "scifact" / "corpus.jsonl", "\n".join(json.dumps(line) for line in lines) + "\n\n")
    skipped: list[str] = []

    documents = list(read_documents(corpus.parent, project_id="p", on_skip=lambda _, why: skipped.append(why)))

    assert [(d.document_id, d.source, d.title, d.text, dict(d.metadata)) for d in documents] == [
        ("4983", "scifact/4983", "Microstructure", "Abstract.", {"year": 2001}),
        ("77", "scifact/77", "Only a title", "Only a title", {}),
        ("79", "scifact/79", "T", "Text.", {"url": "http://x"}),
        ("80", "scifact/80", "", "Null metadata.", {}),
    ]
    assert skipped == ["line 3: record '78' has no text"]


def test_beir_corpus_with_a_bad_line_names_the_line(tmp_path: Path) -> None:
    corpus = write(tmp_path / "corpus.jsonl", '{"_id": "1", "text": "a"}\n{not json\n')

    with pytest.raises(InvalidInputError, match=r"corpus.jsonl:2"):
        list(read_documents(corpus, project_id="p"))


def test_unsupported_path_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError) as raised:
        read_documents(write(tmp_path / "x.pdf", b"%PDF"), project_id="p")

    assert raised.value.field == "path"


def test_missing_path_is_rejected_as_missing(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match=r"nope: no such file or folder; expected a folder"):
        read_documents(tmp_path / "nope", project_id="p")
    with pytest.raises(InvalidInputError, match=r"x.pdf: expected a folder"):  # there, but not a kind it reads
        read_documents(write(tmp_path / "x.pdf", b"%PDF"), project_id="p")


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ('{"_id": true, "text": "a flag for an id"}', r"corpus.jsonl:2: `_id` must be a non-empty string \(got True\)"),
        ('{"_id": "2", "text": ["a", "list"]}', r"corpus.jsonl:2: `text` must be a string \(got list\)"),
        ('{"_id": "2", "title": {"an": "object"}, "text": "x"}', r"corpus.jsonl:2: `title` must be a string"),
        # dropped without a word: the document was written without it
        ('{"_id": "2", "text": "x", "metadata": ["a", "list"]}', r"corpus.jsonl:2: `metadata` must be a JSON object"),
        ('{"_id": "2", "text": "x", "metadata": "year=2001"}', r"corpus.jsonl:2: `metadata` must be a JSON object"),
    ],
)
def test_beir_fields_of_the_wrong_type_are_refused_not_printed_as_python(
    tmp_path: Path, line: str, problem: str
) -> None:
    # `_id: true` became the document "True"; a list text was stored as its Python repr.
    corpus = write(tmp_path / "corpus.jsonl", '{"_id": "1", "text": "fine"}\n' + line + "\n")

    with pytest.raises(InvalidInputError, match=problem):
        list(read_documents(corpus, project_id="p"))
