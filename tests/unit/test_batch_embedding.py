"""calls_of: how a batch search's query texts are cut into embedding calls, each held to one search's deadline."""

from __future__ import annotations

from app.search.batch_embedding import calls_of


def test_short_queries_go_in_one_call() -> None:
    texts = ["lake", "river", "ocean"]

    assert list(calls_of(texts, max_chars=8000)) == [texts]


def test_a_call_holds_no_more_text_than_one_longest_query() -> None:
    texts = ["a" * 60, "b" * 30, "c" * 10, "d" * 100, "e"]

    calls = list(calls_of(texts, max_chars=100))

    assert calls == [["a" * 60, "b" * 30, "c" * 10], ["d" * 100], ["e"]]


def test_a_text_longer_than_the_bound_goes_alone_and_order_is_kept() -> None:
    texts = ["short", "x" * 150, "also short"]

    calls = list(calls_of(texts, max_chars=100))

    assert calls == [["short"], ["x" * 150], ["also short"]]
    assert [text for call in calls for text in call] == texts
