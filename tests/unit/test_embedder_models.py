"""Which `EMBEDDING_MODEL` values the service loads; all-mpnet-base-v2 is a script's, not a bundled model."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from app.engines.embedder import load_embedder

if TYPE_CHECKING:
    from pathlib import Path


@pytest.mark.parametrize("name", ["all-mpnet-base-v2", "sentence-transformers/all-mpnet-base-v2"])
def test_mpnet_is_refused_with_the_script_that_prepares_it(name: str) -> None:
    with pytest.raises(ValueError, match=r"scripts/mpnet_model\.py") as raised:
        load_embedder(name)

    assert "\n" not in str(raised.value)


def test_an_unknown_name_that_is_no_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="neither a bundled model nor a local model folder"):
        load_embedder(str(tmp_path / "missing-model"))
