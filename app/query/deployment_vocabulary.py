"""A deployment's own vocabulary (`QUERY_VOCABULARY_PATH`): abbreviations to expand and names to recognise. Pure.

The file is one JSON object::

    {"abbreviations": {"pmx": "poimen memory index"}, "entities": ["Poimen", "blue harbor"]}

`abbreviations` (term -> expansion) extends the bundled table or replaces it (`QUERY_VOCABULARY_MODE`);
`entities` are names the query reader takes as one name in any case, like a capitalised one. The text is
parsed here; reading the file is the composition root's (`app/wiring/vocabulary.py`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, Literal

from app.query.abbreviations import load_abbreviations
from app.query.intent import is_readable_name, name_words
from app.query.query_tokens import is_query_word

if TYPE_CHECKING:
    from collections.abc import Mapping

VocabularyMode = Literal["extend", "replace"]
ABBREVIATIONS_KEY: Final = "abbreviations"
ENTITIES_KEY: Final = "entities"
MAX_ENTRY_CHARS: Final = 200
"""Longest term, expansion or name accepted: anything longer is a mistake in the file, not a word."""


class VocabularyFileError(ValueError):
    """The vocabulary text is not what the format asks; the message names the entry (`entities[3]`)."""


@dataclass(frozen=True, slots=True)
class DeploymentVocabulary:
    """A parsed vocabulary: lowercase term -> lowercase expansion, and the listed names as written."""

    abbreviations: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    entities: tuple[str, ...] = ()


def _refuse_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # json.loads keeps the last of two equal keys; one entry would be silently lost.
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            msg = f"key {key!r} appears twice in one object"
            raise VocabularyFileError(msg)
        seen[key] = value
    return seen


def _text(value: object, where: str) -> str:
    if not isinstance(value, str):
        msg = f"{where}: expected a string, got {type(value).__name__}"
        raise VocabularyFileError(msg)
    collapsed = " ".join(value.split())
    if not collapsed:
        msg = f"{where}: empty"
        raise VocabularyFileError(msg)
    if len(collapsed) > MAX_ENTRY_CHARS:
        msg = f"{where}: longer than {MAX_ENTRY_CHARS} characters"
        raise VocabularyFileError(msg)
    return collapsed


def _abbreviations(raw: object) -> dict[str, str]:
    if not isinstance(raw, dict):
        msg = f"{ABBREVIATIONS_KEY}: expected an object of term -> expansion, got {type(raw).__name__}"
        raise VocabularyFileError(msg)
    table: dict[str, str] = {}
    for key, value in raw.items():
        where = f"{ABBREVIATIONS_KEY}[{key!r}]"
        term = _text(key, where).lower()
        if not is_query_word(term):
            # A term queries never split out as one word would never be expanded: refused, not ignored.
            msg = f"{where}: not one word as queries are split (letters and digits, joined by . / + ' & -)"
            raise VocabularyFileError(msg)
        if term in table:
            msg = f"{where}: listed twice (terms are case-insensitive)"
            raise VocabularyFileError(msg)
        table[term] = _text(value, where).lower()
    return table


def _entities(raw: object) -> tuple[str, ...]:
    if not isinstance(raw, list):
        msg = f"{ENTITIES_KEY}: expected a list of names, got {type(raw).__name__}"
        raise VocabularyFileError(msg)
    names: dict[tuple[str, ...], str] = {}
    for index, value in enumerate(raw):
        where = f"{ENTITIES_KEY}[{index}]"
        name = _text(value, where)
        if not is_readable_name(name):
            # The reader finds names among its words (a letter, then letters, digits, ' . -): a name with
            # anything else in it could never be found.
            msg = f"{where} {name!r}: not made of words the query reader sees (each starts with a letter)"
            raise VocabularyFileError(msg)
        words = name_words(name)
        if words in names:
            msg = f"{where} {name!r}: listed twice (names are case-insensitive)"
            raise VocabularyFileError(msg)
        names[words] = name
    return tuple(names.values())


def parse_deployment_vocabulary(text: str) -> DeploymentVocabulary:
    """Parse a vocabulary file's text; `VocabularyFileError` naming the entry for anything off the format.

    Unknown top-level keys, wrong shapes, empty or over-long entries, terms that are not one query word,
    names the reader could not find and duplicates are all refused: nothing in the file is silently unused.
    """
    try:
        raw = json.loads(text, object_pairs_hook=_refuse_duplicate_keys)
    except json.JSONDecodeError as error:
        msg = f"not JSON: {error}"
        raise VocabularyFileError(msg) from None
    if not isinstance(raw, dict):
        msg = f"expected one JSON object with {ABBREVIATIONS_KEY!r} and/or {ENTITIES_KEY!r}"
        raise VocabularyFileError(msg)
    unknown = sorted(set(raw) - {ABBREVIATIONS_KEY, ENTITIES_KEY})
    if unknown:
        msg = f"unknown key(s) {', '.join(map(repr, unknown))}: expected {ABBREVIATIONS_KEY!r} and/or {ENTITIES_KEY!r}"
        raise VocabularyFileError(msg)
    if not raw:
        msg = f"holds neither {ABBREVIATIONS_KEY!r} nor {ENTITIES_KEY!r}"
        raise VocabularyFileError(msg)
    abbreviations = _abbreviations(raw[ABBREVIATIONS_KEY]) if ABBREVIATIONS_KEY in raw else {}
    entities = _entities(raw[ENTITIES_KEY]) if ENTITIES_KEY in raw else ()
    return DeploymentVocabulary(abbreviations=MappingProxyType(abbreviations), entities=entities)


def abbreviation_table(vocabulary: DeploymentVocabulary, *, mode: VocabularyMode) -> Mapping[str, str]:
    """The table the optimizer expands with: the bundled one plus the file's (its terms win), or the file's alone."""
    if mode == "replace":
        return vocabulary.abbreviations
    return MappingProxyType({**load_abbreviations(), **vocabulary.abbreviations})
