"""One OpenSearch index per project: the names, built and read by pure functions.

BM25 scores a term by its shard's statistics (document count, average field length, document
frequency), and a search cannot bring its own: so a project's scores are its own only when its chunks
have a one-shard index to themselves. Each project gets `<base>-p-<project>_-v<SCHEMA_VERSION>` behind
the alias `<base>-p-<project>` (`base` is `OPENSEARCH_INDEX`), created on the project's first write
(`app.engines.opensearch_generation.ProjectGenerations`).

Index names must be lowercase, and project ids (`[A-Za-z0-9._-]{1,64}`) are not: an upper-case letter
is written `_` and its lower-case form, and `_` itself `__`. The escape is reversible, so two project ids
never share a name (`Notes` -> `_notes`, `notes` -> `notes`, `_notes` -> `__notes`). The name starts
with `base`, so the rule that no index name starts with `-`, `_` or `+` is `base`'s alone
(`OPENSEARCH_INDEX_PATTERN` in `app.engine_settings`, which also keeps every name within 255 bytes).

Deployments sharing a cluster keep apart by their bases: `Settings` refuses a base containing `-p-` or ending
in `-p`, the only ones whose `<base>-p-` another base's `<base>-p-` is the start of (`poimen-p` + `-p-notes`
is `poimen` + `-p-p-notes`). So `project_aliases_pattern` and `project_of_index` of one base never take
another's index for a project of their own.
"""

from __future__ import annotations

import re
from typing import Final

from app.engines.opensearch_mapping import SCHEMA_VERSION, version_suffix

PROJECT_INFIX: Final = "-p-"
ESCAPE: Final = "_"
MAX_PROJECT_ID_CHARS: Final = 64
MAX_INDEX_NAME_BYTES: Final = 255
"""OpenSearch refuses longer index names (`Settings` keeps `OPENSEARCH_INDEX` short enough for every project's)."""
_PROJECT_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")


def escape_project_id(project_id: str) -> str:
    """The project id as it appears in index names: lowercase, reversible (see the module doc)."""
    escaped: list[str] = []
    for character in project_id:
        if character == ESCAPE:
            escaped.append(ESCAPE * 2)
        elif "A" <= character <= "Z":
            escaped.append(ESCAPE + character.lower())
        else:
            escaped.append(character)
    return "".join(escaped)


def unescape_project_id(escaped: str) -> str | None:
    """The project id `escape_project_id` wrote as `escaped`; None when no project id escapes to it."""
    characters: list[str] = []
    position = 0
    while position < len(escaped):
        character = escaped[position]
        if character == ESCAPE:
            following = escaped[position + 1 : position + 2]
            if following == ESCAPE:
                characters.append(ESCAPE)
            elif "a" <= following <= "z" and following:
                characters.append(following.upper())
            else:
                return None
            position += 2
            continue
        if "A" <= character <= "Z":
            return None  # an escaped id is lowercase
        characters.append(character)
        position += 1
    project_id = "".join(characters)
    return project_id if _PROJECT_ID.fullmatch(project_id) else None


def project_alias(base: str, project_id: str) -> str:
    """The alias every read and write of the project goes through, e.g. `poimen-chunks-p-_notes`."""
    return f"{base}{PROJECT_INFIX}{escape_project_id(project_id)}"


def project_aliases_pattern(base: str) -> str:
    """A wildcard matching every project's alias and index under `base` (for listing them in one request)."""
    return f"{base}{PROJECT_INFIX}*"


SHARED_LAYOUT_VERSIONS: Final = range(1, 7)
"""The schema versions of the one shared index (`<base>-v<N>` behind the alias `base`), before an index per project."""


def shared_index_names(base: str) -> list[str]:
    """The names the one shared index of schema 6 and before had, `<base>-v1` to `<base>-v6`.

    Exact names, not `<base>-v*`: that wildcard matches every index of a deployment whose base is `<base>-v2`.
    """
    return [f"{base}-v{version}" for version in SHARED_LAYOUT_VERSIONS]


def project_of_index(base: str, index: str, version: int = SCHEMA_VERSION) -> str | None:
    """The project whose index of schema `version` is named `index`; None for any other name."""
    prefix, suffix = f"{base}{PROJECT_INFIX}", version_suffix(version)
    if not (index.startswith(prefix) and index.endswith(suffix)) or len(index) <= len(prefix) + len(suffix):
        return None
    return unescape_project_id(index[len(prefix) : -len(suffix)])
