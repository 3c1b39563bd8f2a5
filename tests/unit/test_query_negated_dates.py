"""A date the query negates ("not 3 days ago", "anything except yesterday") is no range: never the opposite.

The clock is Wednesday 2025-03-12 15:30 UTC; its ISO week began Monday 03-10.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from app.query.optimizer import QueryOptimizer
from tests.unit.test_query_relative_dates import NOW, read_range, utc

if TYPE_CHECKING:
    from datetime import datetime


@pytest.mark.parametrize(
    "query",
    [
        "what did we discuss, not 3 days ago",
        "anything except yesterday",
        "anything but yesterday",
        "it wasn't last week",
        "notes excluding last week",
        "everything except the notes from last week",
        "deploys other than last month's",
        "incidents apart from 2024",
        "errors not in March 2025",
        "errors not before April 2024",
        "what happened, but never yesterday",
        "outages not since last Friday",
        "everything except between May 2024 and yesterday",
    ],
)
def test_a_negated_date_is_no_range(query: str) -> None:
    assert read_range(query) == (None, None)


@pytest.mark.parametrize(
    "query",
    ["it wasn\u2019t last week", "the deploy that isn\u2019t from yesterday", "errors that weren\u2019t in March 2025"],
)
def test_a_typographic_apostrophe_negates_a_date_as_a_straight_one_does(query: str) -> None:
    # Phones and word processors type "wasn\u2019t" (U+2019); it was split at the apostrophe and negated nothing.
    assert read_range(query) == read_range(query.replace("\u2019", "'")) == (None, None)


def test_a_typographic_apostrophe_leaves_a_date_the_verb_negation_does_not_reach() -> None:
    assert read_range("which tests didn\u2019t pass last week") == (utc(2025, 3, 3), utc(2025, 3, 10))


def test_a_negated_date_leaves_the_dates_said_before_it() -> None:
    # March holds last week too, so the range is wider than asked, never the opposite of it.
    assert read_range("what happened in March 2025, not last week") == (utc(2025, 3, 1), utc(2025, 4, 1))


@pytest.mark.parametrize(
    ("query", "start", "end"),
    [
        # "not" negates the verb here, not the date: the date stands.
        ("who did not come yesterday", utc(2025, 3, 11), utc(2025, 3, 12)),
        ("which tests did not pass last week", utc(2025, 3, 3), utc(2025, 3, 10)),
        ("what was not deployed in March 2025", utc(2025, 3, 1), utc(2025, 4, 1)),
    ],
)
def test_a_negation_before_other_words_leaves_the_date(query: str, start: datetime, end: datetime) -> None:
    assert read_range(query) == (start, end)


def test_a_negated_date_is_not_named_among_the_entities() -> None:
    analysis = QueryOptimizer(clock=lambda: NOW).analyze("anything except yesterday or 2024")

    assert analysis.entities.relative_dates == ()
    assert analysis.entities.years == ()
    assert not analysis.has_date_filters
