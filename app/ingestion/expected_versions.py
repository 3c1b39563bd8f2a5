"""Conditional writes: the version a caller expects a document at (`If-Match`, `expected_version`), checked."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from app.domain.errors import VersionConflictError

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from app.domain.document_versions import DocumentKey, DocumentState
    from app.domain.models import Document

ANY_VERSION: Final = -1
"""An expected version meaning "whichever is stored": the document must exist (`If-Match: *`)."""


def check_expected_versions(
    documents: Sequence[Document], states: Mapping[DocumentKey, DocumentState], expected: Mapping[str, int]
) -> None:
    """Raise `VersionConflictError` for the first document whose stored state is not the one `expected` names."""
    for document in documents:
        if document.document_id in expected:
            state = states.get((document.project_id, document.document_id))
            check_expected_version(document.document_id, state, expected[document.document_id])


def check_expected_version(document_id: str, state: DocumentState | None, expected: int) -> None:
    """Raise `VersionConflictError` unless `state` is at `expected` (0: absent; `ANY_VERSION`: present)."""
    current = state.version if state is not None else None
    if expected == ANY_VERSION:  # HTTP's `If-Match: *`: any version, so long as the document exists
        if current is None:
            msg = f"document {document_id!r} does not exist; the request expected it to exist (If-Match: *)"
            raise VersionConflictError(msg, document_id=document_id, current_version=None)
        return
    if (current or 0) != expected:
        shown = "does not exist" if current is None else f"is at version {current}"
        msg = f"document {document_id!r} {shown}; the request expected version {expected}"
        raise VersionConflictError(msg, document_id=document_id, current_version=current)
