"""Which document ids a URL path can address: the service refuses the others at ingest."""

from __future__ import annotations

import pytest

from app.ingestion.validation import is_addressable


@pytest.mark.parametrize("document_id", ["a", "runbooks/k8s/pods.md", "a b?.md", "...", ".hidden", "a/.b/c", "%2E%2E"])
def test_ids_a_url_reaches_unchanged(document_id: str) -> None:
    assert is_addressable(document_id)


@pytest.mark.parametrize("document_id", ["a/../b", "./c", "d/.", "..", "a//b", "/a", "notes/"])
def test_ids_a_url_would_collapse_or_resolve(document_id: str) -> None:
    assert not is_addressable(document_id)
