"""Index folders as older (or newer) versions of the tantivy adapter left them, for upgrade tests."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import tantivy

from app.engines.tantivy_schema import EVENT_TIME_US, PAYLOAD, SCHEMA_FIELD_NAMES, SCHEMA_VERSION_FILE

if TYPE_CHECKING:
    from collections.abc import Iterable
    from pathlib import Path

TEXT_FIELDS: Final = SCHEMA_FIELD_NAMES - {EVENT_TIME_US, PAYLOAD}
"""The text and keyword fields of the current schema."""
V1_TEXT_FIELDS: Final = TEXT_FIELDS | {"section_title", "breadcrumb"}
"""Version 1 (no version file): the title and section path were fields of their own."""


def write_poimen_index(path: Path, text_fields: Iterable[str], *, version: str | None) -> None:
    """An empty index of this adapter's shape with `text_fields`, and a version file unless `version` is None."""
    builder = tantivy.SchemaBuilder()
    for field in sorted(text_fields):
        builder.add_text_field(field, stored=False)
    builder.add_integer_field(EVENT_TIME_US, stored=False, indexed=True, fast=True)
    builder.add_bytes_field(PAYLOAD, stored=True, indexed=False)
    path.mkdir()
    tantivy.Index(builder.build(), path=str(path))
    if version is not None:
        (path / SCHEMA_VERSION_FILE).write_text(version, encoding="ascii")
