"""The `poimen` command line on the paths a laptop has: folders with spaces, quotes and letters beyond ASCII."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.integration.conftest import run_cli, stop_leftover_postgres

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

pytestmark = [pytest.mark.slow, pytest.mark.integration]


@pytest.fixture
def spaced_data_dir(poimen_data_dir: Path) -> Iterator[Path]:
    """A POIMEN_DATA_DIR under a folder named as people name them ("My Notes"), beside `poimen_data_dir`."""
    data_dir = poimen_data_dir.parent / "Poimen's notes ü" / "data"
    data_dir.parent.mkdir()
    yield data_dir
    stop_leftover_postgres(data_dir)


def test_a_data_dir_whose_path_has_spaces_and_quotes_starts_the_embedded_database(spaced_data_dir: Path) -> None:
    # The default is ./.poimen: run from "~/My Projects/poimen" it was a path with a space, and PostgreSQL never
    # started ("postgres: invalid argument"), after four tries and a traceback.

    result = run_cli("migrate", data_dir=spaced_data_dir)

    assert result.returncode == 0, result.stderr
    assert "schema at head" in result.stderr
    assert "Traceback" not in result.stderr
