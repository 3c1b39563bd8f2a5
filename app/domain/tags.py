"""How tags are compared: kept as written, matched without regard to case.

A document tagged `Kubernetes` is found by the filter `kubernetes`, `KUBERNETES` and the query `#kubernetes`
(the query optimizer lowercases the query). Every engine compares `tag_key`s: PostgreSQL and tantivy
store them beside the tags, OpenSearch derives them with its `lowercase` normalizer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from app.domain.text_forms import canonical_tag, lower_as_analyzers

if TYPE_CHECKING:
    from collections.abc import Iterable


MAX_DOCUMENT_TAGS: Final = 64
"""Tags one document carries (and so one filter can name: more match nothing)."""
MAX_TAG_CHARS: Final = 128
MAX_TITLE_CHARS: Final = 1024


def tag_key(tag: str) -> str:
    """What two tags share when they are the same tag (`Kubernetes`, `KUBERNETES`: `kubernetes`).

    The tag in NFC without surrounding white space (`app.domain.text_forms.canonical_tag`: a decomposed
    `Zürich` and `" ops "` are `Zürich` and `ops`), then lowered letter by letter.

    Letter by letter (`lower_as_analyzers`) as OpenSearch's `lowercase` normalizer lowers, so every leg
    selects the same chunks: `str.lower` made `İstanbul` `i̇stanbul` and `ΟΔΟΣ` `οδος` where OpenSearch keys
    `istanbul` and `οδοσ`, and those tags were never found there, even spelt exactly (migration 0009 keys
    them again). Not `str.casefold`, which would also make `ß` and `ss` one tag, which OpenSearch does not.
    """
    return lower_as_analyzers(canonical_tag(tag))


def tag_keys(tags: Iterable[str]) -> tuple[str, ...]:
    """The distinct keys of `tags`, in first-seen order."""
    return tuple(dict.fromkeys(map(tag_key, tags)))


def distinct_tags(tags: Iterable[str]) -> tuple[str, ...]:
    """`tags` with one spelling per key, the first seen: `["Ops", "db", "ops"]` is `("Ops", "db")`.

    A document's tags as stored: two spellings of one tag would be one tag to every filter anyway.
    """
    first: dict[str, str] = {}
    for tag in tags:
        first.setdefault(tag_key(tag), tag)
    return tuple(first.values())
