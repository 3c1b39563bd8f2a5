from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

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
