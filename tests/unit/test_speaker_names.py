"""A project's speaker named like a month or a modal word (May, April, June, Will) is a name where the query names her.

Month names and "may" were never names, so in a project whose speakers include May, "What did May say about the
trip?" read no name (the speaker boost never helped) and "What did April say?" read April as a date. The reader
now takes such a word for the speaker's name on evidence only: the caller knows her (`known_names`), the query
writes the word as a name (capitalised, not a modal opening the question), and no context dates it.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from app.query.optimizer import QueryOptimizer

NOW = datetime(2025, 3, 12, 15, 30, tzinfo=UTC)
SPEAKERS = frozenset({"may", "april", "june", "august", "will", "sun"})


@pytest.fixture(scope="module")
def optimizer() -> QueryOptimizer:
    return QueryOptimizer(clock=lambda: NOW)


@pytest.mark.parametrize(
    ("query", "names"),
    [
        ("What did May say about the trip?", ("may",)),
        ("What did May's sister paint?", ("may",)),
        ("What did Caroline tell June?", ("caroline", "june")),
        ("When did Will and August go camping?", ("will", "august")),
        ("What did June and August paint?", ("june", "august")),
        ("What did Sun cook?", ("sun",)),
    ],
)
def test_a_known_speaker_named_like_a_month_or_modal_word_is_a_name(
    optimizer: QueryOptimizer, query: str, names: tuple[str, ...]
) -> None:
    analysis = optimizer.analyze(query, known_names=SPEAKERS)

    assert analysis.names == names
    assert analysis.entities.months == ()
    assert (analysis.event_time_from, analysis.event_time_to) == (None, None)


def test_a_speaker_named_like_a_plain_month_is_no_date(optimizer: QueryOptimizer) -> None:
    unknown = optimizer.analyze("What did April say about the trip?")

    known = optimizer.analyze("What did April say about the trip?", known_names=SPEAKERS)

    assert (unknown.names, unknown.entities.months, unknown.has_date_filters) == ((), (4,), True)
    assert (known.names, known.entities.months, known.has_date_filters) == (("april",), (), False)


@pytest.mark.parametrize(
    ("query", "months"),
    [
        ("What did Caroline do in May?", (5,)),
        ("What did Caroline do on June 3?", (6,)),
        ("What did Caroline do on 3 June?", (6,)),
        ("What did Caroline do on May 3?", (5,)),
        ("What did Caroline do May 3?", (5,)),
        ("What has Caroline done since May 2024?", (5,)),
        ("Where did Caroline go in early August?", (8,)),
        ("Did Caroline move between June and August?", (6, 8)),
        ("What did Caroline do from May 2024 to August?", (5, 8)),
    ],
)
def test_a_speakers_name_its_context_dates_is_the_month(
    optimizer: QueryOptimizer, query: str, months: tuple[int, ...]
) -> None:
    analysis = optimizer.analyze(query, known_names=SPEAKERS)

    assert analysis.names == ("caroline",)
    assert analysis.entities.months == months


def test_a_day_beside_may_makes_it_no_name(optimizer: QueryOptimizer) -> None:
    analysis = optimizer.analyze("What did Caroline do on May 3?", known_names=SPEAKERS)

    assert analysis.names == ("caroline",)
    assert analysis.name_candidates == ()


def test_last_may_is_the_relative_date_whoever_is_named_may(optimizer: QueryOptimizer) -> None:
    analysis = optimizer.analyze("What did Caroline do last May?", known_names=SPEAKERS)

    assert analysis.names == ("caroline",)
    assert analysis.entities.relative_dates == ("last may",)


def test_one_word_can_name_the_speaker_and_the_month_in_one_query(optimizer: QueryOptimizer) -> None:
    analysis = optimizer.analyze("What did June say in June?", known_names=SPEAKERS)

    assert analysis.names == ("june",)
    assert analysis.entities.months == (6,)


@pytest.mark.parametrize(
    "query",
    [
        "May I see what Caroline said?",  # a modal opening the question: its capital is the sentence's
        "Will Caroline go camping?",
        "what may caroline say about the trip",  # lowercase: the word, not the name
    ],
)
def test_a_modal_word_not_written_as_a_name_stays_a_word(optimizer: QueryOptimizer, query: str) -> None:
    analysis = optimizer.analyze(query, known_names=SPEAKERS | {"caroline"})

    assert analysis.names == ("caroline",)
    assert analysis.name_candidates == ()


def test_without_known_names_the_words_are_candidates_only(optimizer: QueryOptimizer) -> None:
    analysis = optimizer.analyze("What did May tell June in August?")

    assert analysis.names == ()
    assert analysis.name_candidates == ("may", "june")  # "in August" is the month, whoever August is
    assert analysis.entities.months == (6, 8)  # June is a plain month: a date until she is known


def test_a_listed_name_that_is_a_month_is_no_date_where_written_as_a_name() -> None:
    optimizer = QueryOptimizer(clock=lambda: NOW, listed_names=["April"])

    analysis = optimizer.analyze("What did April say about the tours?")

    assert analysis.names == ("april",)
    assert analysis.entities.months == ()


def test_a_count_after_may_leaves_her_a_name_and_the_count_back_a_date(optimizer: QueryOptimizer) -> None:
    analysis = optimizer.analyze("What did Caroline tell May 3 days ago?", known_names=SPEAKERS)

    assert analysis.names == ("caroline", "may")
    assert (analysis.entities.months, analysis.entities.relative_dates) == ((), ("3 days ago",))


@pytest.mark.parametrize(
    "query",
    [
        "Yes. May I see what Caroline said?",  # a modal opening a later sentence: its capital is the sentence's
        "What did Caroline say? Will she go camping?",
        "The trip: May I see what Caroline said?",
    ],
)
def test_a_modal_word_opening_a_later_sentence_stays_a_word(optimizer: QueryOptimizer, query: str) -> None:
    analysis = optimizer.analyze(query, known_names=SPEAKERS | {"caroline"})

    assert analysis.names == ("caroline",)
    assert analysis.name_candidates == ()


@pytest.mark.parametrize(
    "query",
    [
        "What Will Caroline Paint Next",  # every word capitalised: the capital is the style's, not a name's
        "HOW MAY CAROLINE HELP",
    ],
)
def test_a_modal_word_in_a_title_case_query_stays_a_word(optimizer: QueryOptimizer, query: str) -> None:
    analysis = optimizer.analyze(query, known_names=SPEAKERS | {"caroline"})

    assert analysis.name_candidates == ()
    assert "caroline" in analysis.names
    assert not {"will", "may"} & set(analysis.names)


def test_a_title_after_a_name_ends_no_sentence(optimizer: QueryOptimizer) -> None:
    analysis = optimizer.analyze("What did Dr. May say about the trip?", known_names=SPEAKERS)

    assert analysis.name_candidates == ("may",)
    assert "may" in analysis.names
