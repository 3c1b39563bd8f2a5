from __future__ import annotations

import argparse

import pytest

from app.cli.arguments import build_parser


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


@pytest.mark.parametrize("port", ["0", "-1", "65536", "http"])
def test_serve_refuses_a_port_outside_1_to_65535(port: str, capsys) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["serve", "--port", port])

    assert exited.value.code == 2
    assert "is not a port (1-65535)" in capsys.readouterr().err


def test_serve_takes_a_port_and_leaves_it_unset_when_not_given() -> None:
    assert build_parser().parse_args(["serve", "--port", "65535"]).port == 65535
    assert build_parser().parse_args(["serve"]).port is None


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["ingest", "notes", "--project", "p", "--batch-size", "0"], "'0' is not a whole number from 1 to 100000"),
        (["ingest", "notes", "--project", "p", "--batch-size", "-5"], "'-5' is not a whole number from 1 to 100000"),
        (["query", "lag", "--project", "p", "--limit", "0"], "'0' is not a whole number from 1 to 100"),
        (["query", "lag", "--project", "p", "--limit", "101"], "'101' is not a whole number from 1 to 100"),
        (["query", "lag", "--project", "p", "--limit", "ten"], "'ten' is not a whole number from 1 to 100"),
        # islice refused it with a traceback after the engines had started
        (["ingest", "n", "--project", "p", "--batch-size", "99999999999999999999"], "from 1 to 100000"),
        (["eval", "--dataset", "d", "--max-queries", "0"], "'0' is not a whole number of at least 1"),
        (["eval", "--dataset", "d", "--max-queries", "-1"], "'-1' is not a whole number of at least 1"),
        # taken as 0 without a word
        (["eval", "--dataset", "d", "--turn-context", "-1"], "'-1' is not a whole number of at least 0"),
        (["eval", "--dataset", "d", "--turn-context", "two"], "'two' is not a whole number of at least 0"),
    ],
)
def test_counts_out_of_range_are_refused_before_anything_runs(argv, message: str, capsys) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(argv)

    assert exited.value.code == 2
    assert message in capsys.readouterr().err


def test_counts_in_range_are_taken_as_given() -> None:
    assert build_parser().parse_args(["ingest", "notes", "--project", "p", "--batch-size", "1"]).batch_size == 1
    assert build_parser().parse_args(["query", "lag", "--project", "p", "--limit", "100"]).limit == 100
    assert build_parser().parse_args(["eval", "--dataset", "d", "--turn-context", "0"]).turn_context == 0


def _commands() -> dict[str, argparse.ArgumentParser]:
    [subcommands] = [action for action in build_parser()._actions if isinstance(action, argparse._SubParsersAction)]
    return dict(subcommands.choices)


@pytest.mark.parametrize("name", sorted(_commands()))
def test_each_command_help_says_what_it_does_and_every_argument_what_it_takes(name: str) -> None:
    # `poimen serve --help` listed --host and --port under no word of what the command does; `path`,
    # `--project` and `--strategy` had no help at all.
    command = _commands()[name]
    help_text = " ".join(command.format_help().split())

    assert command.description
    assert " ".join(command.description.split()) in help_text
    assert "Exit status: 0 done; 1 failed; 2 bad arguments or settings" in help_text
    undocumented = [action.dest for action in command._actions if not action.help]
    assert undocumented == []
