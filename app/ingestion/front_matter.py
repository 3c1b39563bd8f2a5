"""YAML front matter at the top of a markdown text: what is one, and its simple fields. Pure.

A text whose first line is `---` may open a front matter block, closed by a `---` or `...` line. Only
a block shaped like YAML front matter (see `split_front_matter`) is one: prose between two rules is
text, never silently dropped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from app.domain.moments import as_utc
from app.domain.tags import distinct_tags

FrontMatterValue = str | tuple[str, ...]

FRONT_MATTER_KEYS: Final = frozenset(
    {
        "aliases",
        "author",
        "authors",
        "categories",
        "category",
        "created",
        "date",
        "description",
        "draft",
        "id",
        "keywords",
        "lang",
        "language",
        "lastmod",
        "layout",
        "modified",
        "permalink",
        "publish",
        "published",
        "slug",
        "source",
        "status",
        "summary",
        "tag",
        "tags",
        "title",
        "type",
        "updated",
        "url",
        "weight",
    }
)
"""Keys of which a front matter block must hold one (any case): Jekyll's, Hugo's and Obsidian's common ones."""
_FRONT_MATTER_KEY: Final = re.compile(r"^([A-Za-z0-9_][A-Za-z0-9_.-]*)[ \t]*:(?:[ \t]+(.*?))?[ \t]*$")
_FRONT_MATTER_ITEM: Final = re.compile(r"^[ \t]*-(?:[ \t]+(.*?))?[ \t]*$")
"""A `- item` line; a bare `-` is an empty item (YAML's null), which is left out, not the end of the list."""
_BLOCK_SCALAR: Final = re.compile(r"^([|>])[+-]?$")
"""`key: |` or `key: >` (with an optional chomping sign): the value is the indented lines that follow."""
_FRONT_MATTER_CONTINUATION: Final = re.compile(r"^(?:[ \t]+\S|-(?:[ \t]|$))")
"""An indented line (a nested key, a folded value, an item) or a `- item` at the margin."""


def split_front_matter(text: str) -> tuple[dict[str, FrontMatterValue], str]:
    """Split YAML front matter off `text`; return its simple fields and the remaining text (LF endings).

    Only flat fields are read: `key: value` (quotes removed), `key: [a, b]` and `key:` followed by
    `- item` lines (both as tuples), `key: |` and `key: >` followed by indented lines (their text); a key
    holding a nested mapping is left out. Text without a closed block, or whose block
    is not YAML-shaped (a paragraph between two `---` rules, a chat log), is returned whole with no fields:
    stripping it silently dropped the text.
    """
    normalized = normalize_newlines(text)
    lines = normalized.split("\n")
    if not lines or lines[0].rstrip() != "---":
        return {}, normalized
    for index in range(1, len(lines)):
        if lines[index].rstrip() in {"---", "..."}:
            block = lines[1:index]
            if not _looks_like_yaml(block):
                return {}, normalized
            return _parse_front_matter(block), "\n".join(lines[index + 1 :])
    return {}, normalized


def _looks_like_yaml(lines: list[str]) -> bool:
    """Whether every line is front matter's (a key, a continuation, an item, a comment) and a key is a known one.

    A known key (`FRONT_MATTER_KEYS`: what site generators and note apps write) is asked for because prose
    is often YAML too: `alice: did you fix it?` or `Note: bring waders.` between two rules was dropped as
    front matter. An empty block is front matter (`---` `---`, as some generators write it).
    """
    known = not any(line.strip() for line in lines)
    for line in lines:
        if not line.strip() or line.lstrip().startswith("#") or _FRONT_MATTER_CONTINUATION.match(line):
            continue
        key = _FRONT_MATTER_KEY.match(line)
        if key is None:
            return False
        known = known or key.group(1).lower() in FRONT_MATTER_KEYS
    return known


# A flow list's item: a quoted string (which may hold commas) or anything up to the next comma.
_FLOW_ITEM: Final = re.compile(r"""\s*("[^"]*"|'[^']*'|[^,]*)\s*(?:,|$)""")


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in {"'", '"'}:  # noqa: PLR2004 - a pair of quotes
        return value[1:-1]
    return value


def _parse_front_matter(lines: list[str]) -> dict[str, FrontMatterValue]:
    fields: dict[str, FrontMatterValue] = {}
    list_key: str | None = None  # a `key:` with no value: `- item` lines may follow
    block: tuple[str, str, list[str]] | None = None  # a `key: |` or `key: >` and the lines read for it
    for line in lines:
        if block is not None:
            if not line.strip() or line[:1] in {" ", "\t"}:
                block[2].append(line.strip())
                continue
            fields[block[0]] = _block_value(block[1], block[2])
            block = None
        item = _FRONT_MATTER_ITEM.match(line)
        if item is not None and list_key is not None:
            current = fields.get(list_key, ())
            if item.group(1) and isinstance(current, tuple):
                fields[list_key] = (*current, _unquote(item.group(1)))
            continue
        if line[:1] in {" ", "\t"} and line.strip():
            if list_key is not None and fields.get(list_key) == ():
                del fields[list_key]  # a nested mapping, which is not read: no key rather than an empty list
            list_key = None
            continue
        list_key = None
        match = _FRONT_MATTER_KEY.match(line)
        if match is None:
            continue
        key, value = match.group(1), (match.group(2) or "")
        scalar = _BLOCK_SCALAR.match(value)
        if not value:
            fields[key] = ()
            list_key = key
        elif scalar is not None:
            block = (key, scalar.group(1), [])
        else:
            fields[key] = _inline_value(value)
    if block is not None:
        fields[block[0]] = _block_value(block[1], block[2])
    return fields


def _inline_value(value: str) -> FrontMatterValue:
    """`[a, "b, c"]` as a tuple of its items; anything else as its text, quotes removed."""
    if value.startswith("[") and value.endswith("]"):
        return tuple(_unquote(entry.strip()) for entry in _FLOW_ITEM.findall(value[1:-1]) if entry.strip())
    return _unquote(value)


def _block_value(style: str, lines: list[str]) -> str:
    """A block scalar's text: `|` keeps its lines, `>` folds them into one (a blank line stays a break)."""
    while lines and not lines[-1]:
        lines.pop()
    if style == "|":
        return "\n".join(lines)
    return "\n".join(" ".join(paragraph.split("\n")) for paragraph in "\n".join(lines).split("\n\n"))


def normalize_newlines(text: str) -> str:
    """`text` with LF line endings (CRLF and a lone CR become LF) and no leading byte order mark."""
    return text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")


@dataclass(frozen=True, slots=True)
class FrontMatterFields:
    """What a document's front matter says of it: `title`, `tags`, `date` read, and every field as metadata."""

    title: str | None = None
    tags: tuple[str, ...] = ()
    event_time: datetime | None = None
    """`date` when it is ISO 8601 (UTC when it has no offset); an informal date stays in `metadata` only."""
    metadata: dict[str, Any] = field(default_factory=dict)


def front_matter_fields(text: str) -> FrontMatterFields:
    """The fields of `text`'s front matter (`split_front_matter`); empty when it has none."""
    if not text.removeprefix("\ufeff").startswith("---"):  # no block: the text is not split into lines for it
        return FrontMatterFields()
    return document_fields(split_front_matter(text)[0])


def document_fields(fields: dict[str, FrontMatterValue]) -> FrontMatterFields:
    """What front matter's `fields` (`split_front_matter`) say of the document."""
    if not fields:
        return FrontMatterFields()
    title = fields.get("title")
    return FrontMatterFields(
        title=title.strip() or None if isinstance(title, str) else None,
        tags=_tags(fields.get("tags", ())),
        event_time=_event_time(fields.get("date")),
        metadata={key: list(value) if isinstance(value, tuple) else value for key, value in fields.items()},
    )


def _tags(value: FrontMatterValue) -> tuple[str, ...]:
    entries = value.split(",") if isinstance(value, str) else value
    cleaned = (entry.strip().removeprefix("#") for entry in entries)
    return distinct_tags(tag for tag in cleaned if tag)


def _event_time(value: FrontMatterValue | None) -> datetime | None:
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    return as_utc(parsed)
