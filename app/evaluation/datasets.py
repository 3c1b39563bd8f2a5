"""Evaluation data sets in BEIR layout, plus the conversational specifics of LoCoMo-style sets. Reads files.

A data set folder holds `corpus.jsonl` (`_id`, `title`, `text`), `queries.jsonl` (`_id`, `text`) and
`qrels/<split>.tsv` (header, then `query-id corpus-id score`). Optionally `queries_meta.jsonl` carries
per query `sample_id` (its conversation) and `category`.

Conversational sets (every corpus id is `<conversation>:<turn>` and every query names its conversation
in `queries_meta.jsonl`) are searched one conversation at a time, as the LoCoMo paper does: each
conversation becomes its own project. Their corpus titles read `<session date> | <speaker>`
(`1:56 pm on 8 May, 2023 | Caroline`): the date becomes the turn's event time, the speaker stays in the
title so it is indexed and embedded with the utterance.
"""

from __future__ import annotations

import csv
import hashlib
import math
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Final

from app.domain.errors import InvalidInputError
from app.domain.models import Document
from app.ingestion.beir_records import beir_records, record_id, text_field

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
    from pathlib import Path

CORPUS_FILE: Final = "corpus.jsonl"
QUERIES_FILE: Final = "queries.jsonl"
QUERIES_META_FILE: Final = "queries_meta.jsonl"
QRELS_FOLDER: Final = "qrels"
GROUP_SEPARATOR: Final = ":"
SESSION_TITLE_SEPARATOR: Final = " | "
SESSION_DATE_FORMAT: Final = "%I:%M %p on %d %B, %Y"
"""LoCoMo's session date format, e.g. `1:56 pm on 8 May, 2023`."""

_PROJECT_UNSAFE: Final = re.compile(r"[^A-Za-z0-9._-]+")
MAX_PROJECT_CHARS: Final = 64


@dataclass(frozen=True, slots=True)
class EvalQuery:
    """One judged query. `group` is its conversation (None: the whole corpus); `category` its question type."""

    query_id: str
    text: str
    group: str | None = None
    category: str | None = None


@dataclass(frozen=True, slots=True)
class EvalDataset:
    """A data set ready to evaluate: the judged queries of one split and their relevance judgements.

    `qrels` maps query id -> document id -> graded relevance (> 0 is relevant). Only queries with at
    least one judgement are kept, as BEIR does. `conversational` means queries search their group only.
    """

    name: str
    path: Path
    split: str
    queries: tuple[EvalQuery, ...]
    qrels: Mapping[str, Mapping[str, int]]
    conversational: bool
    corpus_fingerprint: str
    groups: tuple[str, ...] = field(default=())


def is_dataset_folder(path: Path) -> bool:
    """True when `path` holds a BEIR corpus and queries."""
    return (path / CORPUS_FILE).is_file() and (path / QUERIES_FILE).is_file()


def find_datasets(path: Path) -> list[Path]:
    """`path` itself when it is a data set, else its data-set subfolders; names starting `_` or `.` are skipped."""
    if is_dataset_folder(path):
        return [path]
    if not path.is_dir():
        return []
    return sorted(
        child
        for child in path.iterdir()
        if child.is_dir() and not child.name.startswith(("_", ".")) and is_dataset_folder(child)
    )


def load_dataset(path: Path, *, split: str) -> EvalDataset:
    """Read the queries and qrels of `split`.

    Raises `FileNotFoundError` when a required file is missing and `InvalidInputError` (naming file and line) for
    a line that is not a record with an `_id`, a qrels score that is not a whole number, or a query id twice.
    """
    qrels = read_qrels(path / QRELS_FOLDER / f"{split}.tsv")
    texts = _read_jsonl_field(path / QUERIES_FILE, "text")
    meta = _read_query_meta(path / QUERIES_META_FILE)
    conversational = bool(meta) and all(
        meta.get(query_id, {}).get("group") is not None for query_id in qrels if query_id in texts
    )
    queries = tuple(
        EvalQuery(
            query_id=query_id,
            text=texts[query_id],
            group=meta.get(query_id, {}).get("group") if conversational else None,
            category=meta.get(query_id, {}).get("category"),
        )
        for query_id in texts
        if query_id in qrels and any(score > 0 for score in qrels[query_id].values())
    )
    kept = {query.query_id for query in queries}
    groups = tuple(sorted({query.group for query in queries if query.group is not None}))
    return EvalDataset(
        name=path.resolve().name,
        path=path,
        split=split,
        queries=queries,
        qrels={query_id: judged for query_id, judged in qrels.items() if query_id in kept},
        conversational=conversational,
        corpus_fingerprint=corpus_fingerprint(path / CORPUS_FILE),
        groups=groups,
    )


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    """BEIR qrels: a tab-separated header line, then `query-id corpus-id score` rows (whole-number scores)."""
    qrels: dict[str, dict[str, int]] = {}
    with path.open(encoding="utf-8", newline="") as rows:
        reader = csv.reader(rows, delimiter="\t")
        for line_number, row in enumerate(reader):
            if line_number == 0 and row and not row[-1].lstrip("-").isdigit():
                continue  # header
            if len(row) < 3:  # noqa: PLR2004 - query id, corpus id, score
                continue
            qrels.setdefault(row[0], {})[row[1]] = _whole_score(row[2], path, line_number + 1)
    return qrels


def _whole_score(text: str, path: Path, line_number: int) -> int:
    """A graded relevance: `2`, or `2.0` as some converters write it; `0.5` or `high` is refused."""
    try:
        score = float(text)
    except ValueError:
        score = math.nan
    if not score.is_integer():
        msg = f"{path}:{line_number}: the score {text!r} is not a whole number (graded relevance: 0, 1, 2...)"
        raise InvalidInputError(msg, field="path")
    return int(score)


def corpus_fingerprint(corpus: Path) -> str:
    """A cheap identity of the corpus file (size and modification time), for the ingest marker."""
    stat = corpus.stat()
    return hashlib.sha256(f"{corpus.resolve()}|{stat.st_size}|{stat.st_mtime_ns}".encode()).hexdigest()[:16]


def project_id_for(dataset_name: str, group: str | None) -> str:
    """The project a data set (or one of its conversations) is ingested into: `eval-<name>[-<group>]`."""
    raw = f"eval-{dataset_name}" if group is None else f"eval-{dataset_name}-{group}"
    return _PROJECT_UNSAFE.sub("-", raw)[:MAX_PROJECT_CHARS]


def group_of(document_id: str) -> str:
    """The conversation a conversational corpus id belongs to: the part before the first `:`."""
    return document_id.split(GROUP_SEPARATOR, 1)[0]


def parse_session_title(title: str) -> tuple[datetime | None, str]:
    """`"1:56 pm on 8 May, 2023 | Caroline"` -> (2023-05-08 13:56 UTC, "Caroline"); unparsable dates give None."""
    date_text, separator, speaker = title.partition(SESSION_TITLE_SEPARATOR)
    if not separator:
        return None, title
    try:
        moment = datetime.strptime(date_text.strip(), SESSION_DATE_FORMAT).replace(tzinfo=UTC)
    except ValueError:
        return None, title
    return moment, speaker.strip()


@dataclass(frozen=True, slots=True)
class TurnShape:
    """How a conversational turn becomes a document.

    `title`: "speaker" keeps only the speaker as title (the session date is the event time), "session"
    keeps the corpus title (`<date> | <speaker>`). `context_turns`: how many preceding turns of the same
    session become the document's `context` (embedded with it, not part of its text), as `Speaker: text`.
    """

    title: str = "session"
    context_turns: int = 1

    def describe(self) -> dict[str, object]:
        """The shape as recorded in reports and ingest markers."""
        return {"title": self.title, "context_turns": self.context_turns}


TURN_TITLES: Final = ("speaker", "session")


def read_corpus(dataset: EvalDataset, shape: TurnShape | None = None) -> Iterator[Document]:
    """The corpus as documents, in file order, each in its project (see `project_id_for`).

    Conversational turns get their session date as event time and are shaped by `shape` (default
    `TurnShape()`). Records with no text use their title as text.
    """
    shape = shape or TurnShape()
    previous: list[tuple[str, str]] = []  # (session key, "Speaker: text") of the turns before, newest last
    seen: set[str] = set()
    for where, record in beir_records(dataset.path / CORPUS_FILE):
        document_id = record_id(record, where)
        if document_id in seen:
            msg = f"{where}: the corpus id {document_id!r} appears twice"
            raise InvalidInputError(msg, field="path")
        seen.add(document_id)
        title = text_field(record, "title", where)
        text = text_field(record, "text", where) or title
        if not text.strip():
            continue
        if not dataset.conversational:
            yield Document(
                project_id=project_id_for(dataset.name, None),
                document_id=document_id,
                source=f"{dataset.name}/{document_id}",
                title=title,
                text=text,
            )
            continue
        event_time, speaker = parse_session_title(title)
        session = session_of(document_id)
        context_lines = [turn for key, turn in previous[-shape.context_turns :] if key == session]
        previous = [*previous[-max(shape.context_turns, 1) :], (session, f"{speaker}: {text}")]
        yield Document(
            project_id=project_id_for(dataset.name, group_of(document_id)),
            document_id=document_id,
            source=f"{dataset.name}/{document_id}",
            title=speaker if shape.title == "speaker" else title,
            text=text,
            event_time=event_time,
            context="\n".join(context_lines) if shape.context_turns > 0 else "",
        )


def session_of(document_id: str) -> str:
    """`conv-26:D3:7` -> `conv-26:D3`: the conversation and session a turn belongs to."""
    return document_id.rsplit(GROUP_SEPARATOR, 1)[0]


def _read_jsonl_field(path: Path, name: str) -> dict[str, str]:
    values: dict[str, str] = {}
    for where, record in beir_records(path):
        query_id = record_id(record, where)
        if query_id in values:
            msg = f"{where}: the id {query_id!r} appears twice"
            raise InvalidInputError(msg, field="path")
        values[query_id] = text_field(record, name, where)
    return values


def _read_query_meta(path: Path) -> dict[str, dict[str, str | None]]:
    """Per query: `group` (its `sample_id`) and `category`, as strings; empty when the file is absent."""
    if not path.is_file():
        return {}
    meta: dict[str, dict[str, str | None]] = {}
    for where, record in beir_records(path):
        sample_id, category = record.get("sample_id"), record.get("category")
        meta[record_id(record, where)] = {
            "group": None if sample_id is None else str(sample_id),
            "category": None if category is None else str(category),
        }
    return meta
