"""Read what `poimen ingest PATH` takes into `Document`s. For the CLI only: it reads files.

Accepted paths:
- a folder of notes: every `*.md`, `*.markdown` and `*.txt` below it, recursively, in sorted path
  order, skipping hidden files and folders (`.git`, `.obsidian`), symlinked folders and symlinked files
  (a link may lead out of the folder: to a secret, or to a note ingested twice). Document id
  and source are both the path relative to the folder, with `/` separators and the extension kept
  (`runbooks/port-forward.md`), so `a.md` and `a.txt` never collide and a hit names its file. Title:
  front matter `title`, else the first heading, else the file stem (`app.ingestion.titles`, the HTTP
  API's rule, which has no file stem). Front matter `tags` become tags,
  `date` (ISO 8601; UTC when no offset is given) the event time, and every front matter field is kept
  in metadata.
- a single such file: the same, relative to its own folder.
- a BEIR corpus: a `*.jsonl` file, or a folder holding `corpus.jsonl`. One document per line: id
  `_id`, `title`, `text`; a `metadata` object and any other fields pass through as metadata. Source
  is `<corpus folder name>/<_id>` so a source prefix selects one corpus. A record with no text uses
  its title as text; one with no title is titled as an HTTP body is (front matter, first heading).
Files that hold nothing to index (empty, only whitespace, or binary with NUL bytes), symlinked files and
symlinked folders below a folder are skipped and reported to `on_skip(path, reason)`; a path named
itself (the folder, or a single file) is read even when it is a link: the caller chose it. A note that is
not valid UTF-8 is read with U+FFFD for the bytes that do not decode (a stray byte does not stop a whole
ingest) and reported to `on_warning(path, message)`, so that nothing is changed silently.
"""

from __future__ import annotations

import codecs
import os
from pathlib import Path
from typing import TYPE_CHECKING, Final

from app.domain.errors import InvalidInputError
from app.domain.models import Document
from app.ingestion.beir_records import beir_records, record_id, text_field
from app.ingestion.front_matter import document_fields, front_matter_fields, split_front_matter
from app.ingestion.titles import document_title

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator


NOTE_SUFFIXES: Final = frozenset({".md", ".markdown", ".txt"})
BEIR_CORPUS_FILE: Final = "corpus.jsonl"


def read_documents(
    path: Path,
    *,
    project_id: str,
    on_skip: Callable[[Path, str], None] | None = None,
    on_warning: Callable[[Path, str], None] | None = None,
) -> Iterator[Document]:
    """Yield the documents under `path` (see the module docstring for what is accepted).

    Raises:
        InvalidInputError: `path` does not exist or is no accepted kind of file (field "path").
    """
    if path.is_dir():
        corpus = path / BEIR_CORPUS_FILE
        if corpus.is_file():
            return read_beir_corpus(corpus, project_id=project_id, on_skip=on_skip)
        return read_note_folder(path, project_id=project_id, on_skip=on_skip, on_warning=on_warning)
    if path.is_file() and path.suffix.lower() == ".jsonl":
        return read_beir_corpus(path, project_id=project_id, on_skip=on_skip)
    if path.is_file() and path.suffix.lower() in NOTE_SUFFIXES:
        return _single_note(path, project_id=project_id, on_skip=on_skip, on_warning=on_warning)
    # A mistyped path was told it was the wrong kind of file.
    what = "expected" if path.exists() else "no such file or folder; expected"
    msg = f"{path}: {what} a folder, a .md/.markdown/.txt file or a BEIR .jsonl corpus"
    raise InvalidInputError(msg, field="path")


def read_note_folder(
    folder: Path,
    *,
    project_id: str,
    on_skip: Callable[[Path, str], None] | None = None,
    on_warning: Callable[[Path, str], None] | None = None,
) -> Iterator[Document]:
    """Yield one document per note file below `folder`, in sorted relative-path order."""
    files, linked_folders = _note_files(folder)
    for linked in linked_folders:
        _report(on_skip, linked, "a symlinked folder (not followed)")
    for file_path in files:
        if file_path.is_symlink():
            _report(on_skip, file_path, "a symlink (not followed)")
            continue
        document = read_note(file_path, base=folder, project_id=project_id, on_skip=on_skip, on_warning=on_warning)
        if document is not None:
            yield document


def read_note(
    file_path: Path,
    *,
    base: Path,
    project_id: str,
    on_skip: Callable[[Path, str], None] | None = None,
    on_warning: Callable[[Path, str], None] | None = None,
) -> Document | None:
    """Read one markdown or text file as a document with id `file_path` relative to `base`; None if skipped."""
    if not file_path.is_file():
        # A named pipe called `notes.md` would block the read forever; a device could be endless.
        _report(on_skip, file_path, "not a regular file")
        return None
    relative = file_path.relative_to(base).as_posix()
    try:
        relative.encode("utf-8")
    except UnicodeEncodeError:
        # Its id and source would hold bytes no UTF-8 text can (PostgreSQL refused the whole batch).
        _report(on_skip, file_path, "its path is not valid UTF-8")
        return None
    raw = file_path.read_bytes()
    if b"\x00" in raw:
        _report(on_skip, file_path, "binary file (contains NUL bytes)")
        return None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        text = raw.decode("utf-8-sig", errors="replace")
        offset = error.start + (len(codecs.BOM_UTF8) if raw.startswith(codecs.BOM_UTF8) else 0)  # of the file
        message = f"not valid UTF-8 (first at byte offset {offset}): read with U+FFFD for the bytes that do not decode"
        _report(on_warning, file_path, message)
    fields, body = split_front_matter(text)
    if not body.strip():
        _report(on_skip, file_path, "no text")
        return None
    front = document_fields(fields)
    return Document(
        project_id=project_id,
        document_id=relative,
        source=relative,
        title=document_title("", text=body, front_title=front.title, file_stem=file_path.stem),
        text=text,
        tags=front.tags,
        event_time=front.event_time,
        metadata=front.metadata,
    )


def read_beir_corpus(
    corpus: Path, *, project_id: str, on_skip: Callable[[Path, str], None] | None = None
) -> Iterator[Document]:
    """Yield one document per line of a BEIR `corpus.jsonl`, in file order.

    Raises:
        InvalidInputError: a line is not a JSON object with a string `_id`, or its `metadata` is not an
            object (field "path").
    """
    source_prefix = corpus.parent.name or corpus.stem
    for where, record in beir_records(corpus):
        document_id = record_id(record, where)
        given_title = text_field(record, "title", where)
        text = text_field(record, "text", where) or given_title
        if not text.strip():
            line_number = where.rsplit(":", 1)[1]
            _report(on_skip, corpus, f"line {line_number}: record {document_id!r} has no text")
            continue
        metadata = {key: value for key, value in record.items() if key not in {"_id", "title", "text", "metadata"}}
        nested = record.get("metadata")
        if nested is not None and not isinstance(nested, dict):
            # A list or a string was dropped without a word: the document was written without it.
            msg = f"{where}: `metadata` must be a JSON object (got {type(nested).__name__})"
            raise InvalidInputError(msg, field="path")
        yield Document(
            project_id=project_id,
            document_id=document_id,
            source=f"{source_prefix}/{document_id}",
            title=document_title(given_title, text=text, front_title=front_matter_fields(text).title),
            text=text,
            metadata={**(nested or {}), **metadata},
        )


def _single_note(
    file_path: Path,
    *,
    project_id: str,
    on_skip: Callable[[Path, str], None] | None,
    on_warning: Callable[[Path, str], None] | None,
) -> Iterator[Document]:
    document = read_note(
        file_path, base=file_path.parent, project_id=project_id, on_skip=on_skip, on_warning=on_warning
    )
    if document is not None:
        yield document


def _note_files(folder: Path) -> tuple[list[Path], list[Path]]:
    """The note files below `folder` (sorted by relative path) and the symlinked folders not walked into."""
    found: list[Path] = []
    linked: list[Path] = []
    for directory, subdirectories, file_names in os.walk(folder, followlinks=False):
        subdirectories[:] = sorted(name for name in subdirectories if not name.startswith("."))
        # os.walk lists a link to a folder among the folders and, not following it, skips it without a word.
        linked.extend(Path(directory) / name for name in subdirectories if (Path(directory) / name).is_symlink())
        found.extend(
            Path(directory) / name
            for name in file_names
            if not name.startswith(".") and Path(name).suffix.lower() in NOTE_SUFFIXES
        )
    return sorted(found, key=lambda file_path: file_path.relative_to(folder).as_posix()), sorted(linked)


def _report(receiver: Callable[[Path, str], None] | None, path: Path, reason: str) -> None:
    if receiver is not None:
        receiver(path, reason)
