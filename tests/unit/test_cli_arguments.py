from __future__ import annotations

import pytest

from app.cli.main import build_parser


@pytest.mark.parametrize(
    "argv",
    [
        ["ingest", "notes", "--project", "bad name"],
        ["reindex", "--project", ""],
        ["query", "lag", "--project", "p/q"],
        ["export", "--project", "p" * 65],
        ["import", "export.jsonl", "--project", "café"],
    ],
)
def test_a_project_the_api_cannot_address_is_refused_before_anything_runs(argv, capsys) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(argv)

    assert exited.value.code == 2
    assert "is not a project id" in capsys.readouterr().err


def test_a_valid_project_id_is_taken_as_given() -> None:
    arguments = build_parser().parse_args(["query", "lag", "--project", "team-a.notes_2"])

    assert arguments.project == "team-a.notes_2"
