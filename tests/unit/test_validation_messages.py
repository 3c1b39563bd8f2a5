"""Msgspec's validation messages as a person reads them, the input named first."""

from __future__ import annotations

import msgspec
import pytest

from app.api.search_requests import SearchRequest
from app.api.strict_bodies import DATETIME_HINT, readable_validation_message
from app.domain.project_ids import PROJECT_ID_PATTERN, PROJECT_ID_RULE


@pytest.mark.parametrize(
    ("message", "readable"),
    [
        ("Expected `str` of length >= 1 - at `$.query`", "query: must not be empty"),
        ("Expected `str` of length <= 256 - at `$.id`", "id: must be at most 256 characters long"),
        ("Expected `str` of length >= 3 - at `$.a`", "a: must be at least 3 characters long"),
        ("Expected `array` of length >= 1 - at `$.queries`", "queries: must hold at least one item"),
        ("Expected `array` of length <= 64 - at `$.filters.tags`", "filters.tags: must hold at most 64 items"),
        ("Expected `int` >= 1 - at `$.limit`", "limit: must be at least 1"),
        ("Expected `float` <= 10.0 - at `$.weights.semantic`", "weights.semantic: must be at most 10.0"),
        ("Expected `array`, got `str` - at `$.tags`", "tags: expected array, got str"),
        ("Object contains unknown field `project` - at `$.queries[0]`", "queries[0]: unknown field `project`"),
        ("Object contains unknown field `colour`", "unknown field `colour`"),
        ("Object missing required field `query`", "missing required field `query`"),
        ("Invalid RFC3339 encoded datetime - at `$.event_time`", f"event_time: expected {DATETIME_HINT}"),
        ("Expected `int` >= 1", "must be at least 1"),
        (
            f"Expected `str` matching regex {PROJECT_ID_PATTERN!r} - at `$.project`",
            f"project: must be {PROJECT_ID_RULE}",
        ),
        (
            "Expected `datetime` with a timezone component - at `$.as_of`",
            (
                "as_of: expected a date-time with an offset or Z (2024-05-08T12:00:00Z): one without is not taken"
                " as UTC here"
            ),
        ),
        ("Expected `str` matching regex '^L[0-6]$' - at `$.filters.level`", "filters.level: must be a level, L0 to L6"),
        ("Something msgspec says that no rule knows", "Something msgspec says that no rule knows"),
    ],
)
def test_each_constraint_reads_as_words(message: str, readable: str) -> None:
    assert readable_validation_message(message) == readable


@pytest.mark.parametrize("project", ["alpha\n", "alpha\r\n", "\nalpha", ".", ".."])
def test_a_body_project_id_is_held_to_the_rule_the_path_is(project: str) -> None:
    # Python's `$` also matches before a final newline: "alpha\n" passed the body's pattern and reached the
    # engines and cache keys, where a path or query parameter with it was a 400.
    body = msgspec.json.encode({"project": project, "query": "x"})
    with pytest.raises(msgspec.ValidationError, match="project"):
        msgspec.json.decode(body, type=SearchRequest)
    assert (
        msgspec.json.decode(msgspec.json.encode({"project": "alpha", "query": "x"}), type=SearchRequest).project
        == "alpha"
    )
