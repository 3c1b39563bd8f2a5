"""A document's title: one rule for every way a document comes in (the HTTP API, `poimen ingest`). Pure."""

from __future__ import annotations

from app.ingestion.chunking import first_heading


def document_title(given: str, *, text: str, front_title: str | None, file_stem: str = "") -> str:
    """The title given; else front matter's `title`; else the text's first heading; else `file_stem`; else "".

    `file_stem` is a note file's name without its extension, which only `poimen ingest` of a file has: an
    HTTP body with no title, front matter or heading keeps an empty one (send `title`). Before this rule was
    shared, an HTTP write of `# Ports ...` without a title stored "" and filed its top heading at level L1,
    where `poimen ingest` of the same file stored the title "Ports" and that section at L0: one note read
    two ways, so a `level` filter or a title match found it by one way in and not the other.
    """
    return given or front_title or first_heading(text) or file_stem
