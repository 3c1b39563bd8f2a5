"""`document_title`: the one rule the HTTP API and `poimen ingest` title a document by."""

from __future__ import annotations

import pytest

from app.ingestion.titles import document_title


@pytest.mark.parametrize(
    ("given", "front_title", "text", "file_stem", "title"),
    [
        ("Given", "Front", "# Heading\n\nBody.", "stem", "Given"),
        ("", "Front", "# Heading\n\nBody.", "stem", "Front"),
        ("", None, "Intro.\n\n## Heading\n\nBody.", "stem", "Heading"),
        ("", None, "```\n# not a heading\n```\nBody.", "stem", "stem"),
        ("", None, "Plain text.", "", ""),
    ],
)
def test_the_first_of_given_front_matter_heading_and_file_stem_titles_a_document(
    given, front_title, text, file_stem, title
) -> None:
    assert document_title(given, text=text, front_title=front_title, file_stem=file_stem) == title
