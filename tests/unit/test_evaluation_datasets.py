from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from app.domain.errors import InvalidInputError
from app.evaluation.datasets import (
    TurnShape,
    find_datasets,
    load_dataset,
    parse_session_title,
    project_id_for,
    read_corpus,
    read_qrels,
)

FIXTURES = Path(__file__).parent.parent / "fixtures" / "eval"


def test_load_dataset_keeps_only_judged_queries() -> None:
    dataset = load_dataset(FIXTURES / "tiny-beir", split="test")

    assert [query.query_id for query in dataset.queries] == ["q1", "q2", "q3", "q4"]
    assert dataset.qrels["q3"] == {"d4": 1}
    assert not dataset.conversational


def test_split_selects_its_own_qrels() -> None:
    dataset = load_dataset(FIXTURES / "tiny-beir", split="train")

    assert [query.query_id for query in dataset.queries] == ["q1"]


def test_qrels_header_is_skipped() -> None:
    qrels = read_qrels(FIXTURES / "tiny-beir" / "qrels" / "test.tsv")

    assert "query-id" not in qrels
    assert qrels["q1"] == {"d1": 1}


def test_queries_with_a_sample_id_make_a_conversational_dataset() -> None:
    dataset = load_dataset(FIXTURES / "tiny-chat", split="test")

    assert dataset.conversational
    assert dataset.groups == ("conv-a", "conv-b")
    assert {query.query_id: query.category for query in dataset.queries}["conv-b:q1"] == "1"


def test_each_conversation_is_its_own_project() -> None:
    dataset = load_dataset(FIXTURES / "tiny-chat", split="test")

    projects = {document.document_id: document.project_id for document in read_corpus(dataset)}

    assert projects["conv-a:D1:1"] == "eval-tiny-chat-conv-a"
    assert projects["conv-b:D2:1"] == "eval-tiny-chat-conv-b"


def test_session_date_becomes_event_time_and_speaker_the_title() -> None:
    dataset = load_dataset(FIXTURES / "tiny-chat", split="test")

    first = next(read_corpus(dataset, TurnShape(title="speaker")))

    assert first.event_time == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert first.title == "Caroline"


def test_session_title_shape_keeps_the_corpus_title() -> None:
    dataset = load_dataset(FIXTURES / "tiny-chat", split="test")

    first = next(read_corpus(dataset, TurnShape(title="session", context_turns=0)))

    assert first.title == "1:56 pm on 8 May, 2023 | Caroline"
    assert first.context == ""


def test_context_is_the_previous_turn_of_the_same_session_only() -> None:
    dataset = load_dataset(FIXTURES / "tiny-chat", split="test")

    documents = {document.document_id: document for document in read_corpus(dataset, TurnShape(context_turns=1))}

    assert documents["conv-a:D1:1"].context == ""
    assert documents["conv-a:D1:2"].context == "Caroline: I went to a support group yesterday and it was so powerful."
    assert documents["conv-a:D2:1"].context == ""  # a new session starts without context
    assert documents["conv-a:D1:2"].text == "That is great! I painted a sunrise over the lake last week."


def test_two_context_turns_keep_dialogue_order() -> None:
    dataset = load_dataset(FIXTURES / "tiny-chat", split="test")

    documents = {document.document_id: document for document in read_corpus(dataset, TurnShape(context_turns=2))}

    assert documents["conv-b:D1:2"].context == "Jon: I lost my job as a banker so I will open a dance studio."
    assert documents["conv-b:D2:1"].context == ""


def test_parse_session_title_without_a_date_keeps_the_title() -> None:
    assert parse_session_title("Just a title") == (None, "Just a title")
    assert parse_session_title("not a date | Jon") == (None, "not a date | Jon")
    assert parse_session_title("10:37 am on 27 June, 2023 | Caroline") == (
        datetime(2023, 6, 27, 10, 37, tzinfo=UTC),
        "Caroline",
    )


def test_project_ids_are_sanitised() -> None:
    assert project_id_for("sci fact", None) == "eval-sci-fact"
    assert project_id_for("locomo", "conv-26") == "eval-locomo-conv-26"


def test_find_datasets_skips_underscore_folders() -> None:
    found = find_datasets(FIXTURES)

    assert [path.name for path in found] == ["tiny-beir", "tiny-chat"]
    assert find_datasets(FIXTURES / "tiny-beir") == [FIXTURES / "tiny-beir"]


def edited_copy(tmp_path: Path, name: str, text: str, *, append: bool = True) -> Path:
    """tiny-beir copied to `tmp_path`, with `text` appended to (or replacing) its file `name`."""
    copy = shutil.copytree(FIXTURES / "tiny-beir", tmp_path / "tiny-beir")
    target = copy / name
    target.write_text((target.read_text(encoding="utf-8") if append else "") + text, encoding="utf-8")
    return copy


@pytest.mark.parametrize(
    ("name", "text", "problem"),
    [
        ("queries.jsonl", "{not json\n", r"queries.jsonl:6: not valid JSON"),
        ("queries.jsonl", '["a", "list"]\n', r"queries.jsonl:6: expected a JSON object"),
        ("queries.jsonl", '{"text": "no id"}\n', r"queries.jsonl:6: `_id` must be a non-empty string \(got None\)"),
        ("queries.jsonl", '{"_id": "q1", "text": "again"}\n', r"queries.jsonl:6: the id 'q1' appears twice"),
        ("queries.jsonl", '{"_id": true, "text": "a flag"}\n', r"`_id` must be a non-empty string \(got True\)"),
        ("qrels/test.tsv", "q1\td2\t0.5\n", r"test.tsv:\d+: the score '0.5' is not a whole number"),
        ("qrels/test.tsv", "q1\td2\thigh\n", r"the score 'high' is not a whole number"),
    ],
)
def test_a_malformed_line_is_a_dataset_error_naming_file_and_line(
    tmp_path: Path, name: str, text: str, problem: str
) -> None:
    folder = edited_copy(tmp_path, name, text)

    with pytest.raises(InvalidInputError, match=problem):
        load_dataset(folder, split="test")


def test_a_whole_number_score_written_as_a_float_is_read(tmp_path: Path) -> None:
    path = tmp_path / "qrels.tsv"
    path.write_text("query-id\tcorpus-id\tscore\nq1\td1\t2.0\n", encoding="utf-8")

    assert read_qrels(path) == {"q1": {"d1": 2}}


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('{"_id": "d1", "text": "the same id again"}\n', r"corpus.jsonl:8: the corpus id 'd1' appears twice"),
        ('{"_id": "d9", "text": ["a", "list"]}\n', r"corpus.jsonl:8: `text` must be a string \(got list\)"),
        ('{"title": "no id", "text": "x"}\n', r"corpus.jsonl:8: `_id` must be a non-empty string"),
    ],
)
def test_a_malformed_corpus_line_is_a_dataset_error(tmp_path: Path, text: str, problem: str) -> None:
    dataset = load_dataset(edited_copy(tmp_path, "corpus.jsonl", text), split="test")

    with pytest.raises(InvalidInputError, match=problem):
        list(read_corpus(dataset))
