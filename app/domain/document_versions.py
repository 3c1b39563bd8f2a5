"""Versions a document store answers its writers with: keys, the state a write checks, what a save gave.

Contracts:
- A document is keyed by (project id, document id) (`DocumentKey`) in every project of one store.
- A document's version grows with every write of it; a save answers each written document's new version
  (`SavedVersions`, a mapping) and the projects' generations after it.
- An import written in several saves passes a `RestoreFloor`, so its saves version documents as one save would.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from collections.abc import Iterator

DocumentKey: TypeAlias = tuple[str, str]
"""(project id, document id)."""


@dataclass(frozen=True, slots=True)
class DocumentState:
    """What a writer needs to know of a stored document: its content hash, version, and whether it is indexed."""

    content_hash: str
    version: int
    lexically_indexed: bool
    """As `StoredDocument.lexically_indexed`: a write that finds it unchanged answers its ETag from it."""


@dataclass(frozen=True, slots=True)
class RestoreFloor:
    """An import written in several saves: the project's generation `before` its first and the one its last `left`.

    While the project's generation is still `left` (nothing else moved it since), the saves are as one: a
    document new to the project gets its exported version as long as that is past `before`, not past the
    generation the import's own earlier saves raised (one past it, which no export of over a page restored).
    """

    project_id: str
    before: int
    left: int


@dataclass(frozen=True, slots=True, eq=False)  # eq from `Mapping`: equal to a dict of the same versions
class SavedVersions(Mapping[DocumentKey, int]):
    """What a save gave: each document's new version (this mapping) and which documents it `created`.

    `created` names the documents not stored when the save ran: new ones, and ones a delete by selection
    removed after the writer read them (the write then stands after the delete, as a new document).
    `generations`: each written project's generation after the save (a `RestoreFloor`'s next `left`).
    """

    versions: Mapping[DocumentKey, int]
    created: frozenset[DocumentKey] = frozenset()
    generations: Mapping[str, int] = field(default_factory=dict)

    def __getitem__(self, key: DocumentKey) -> int:
        return self.versions[key]

    def __iter__(self) -> Iterator[DocumentKey]:
        return iter(self.versions)

    def __len__(self) -> int:
        return len(self.versions)
