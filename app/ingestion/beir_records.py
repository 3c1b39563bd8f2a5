"""The records of a BEIR JSON-lines file (`corpus.jsonl`, `queries.jsonl`): each line one JSON object.

Shared by `poimen ingest` of a corpus and by the evaluation's data sets, so both refuse the same lines
with the same words: a message naming the file and line, never a traceback or a field printed as Python
(`_id: true` became the id "True"; a list `text` its repr).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from app.domain.errors import InvalidInputError

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
    from pathlib import Path


def beir_records(path: Path) -> Iterator[tuple[str, dict[str, object]]]:
    """Each non-blank line as (`file:line`, the object it holds); `InvalidInputError` for any other line."""
    # Decoded a line at a time: a file decoded as a whole said only "'utf-8' codec can't decode byte 0xe9 in
    # position 56", an offset into a read buffer, with no line to look at.
    with path.open("rb") as lines:
        for line_number, raw_line in enumerate(lines, start=1):
            where = f"{path}:{line_number}"
            try:
                # utf-8-sig: a file an editor saved may start with a byte order mark.
                line = raw_line.decode("utf-8-sig" if line_number == 1 else "utf-8")
            except UnicodeDecodeError as error:
                msg = f"{where}: not valid UTF-8 (first at byte offset {error.start})"
                raise InvalidInputError(msg, field="path") from None
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError as error:
                msg = f"{where}: not valid JSON ({error})"
                raise InvalidInputError(msg, field="path") from None
            if not isinstance(record, dict):
                msg = f"{where}: expected a JSON object with an `_id`"
                raise InvalidInputError(msg, field="path")
            yield where, record


def record_id(record: Mapping[str, object], where: str) -> str:
    """`_id`: a non-empty string, or a whole number as some converters write it."""
    value = record.get("_id")
    if isinstance(value, bool) or not isinstance(value, (str, int)) or not str(value).strip():
        msg = f"{where}: `_id` must be a non-empty string (got {value!r})"
        raise InvalidInputError(msg, field="path")
    return str(value)


def text_field(record: Mapping[str, object], name: str, where: str) -> str:
    """A text field: a string (a number as its digits), absent or null as empty; a list or object is refused."""
    value = record.get(name)
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        msg = f"{where}: `{name}` must be a string (got {type(value).__name__})"
        raise InvalidInputError(msg, field="path")
    return str(value)
