"""The quality an `Accept` header gives a media type (RFC 9110, 12.5.1): its most specific matching range's."""

from __future__ import annotations

import pytest

from app.api.content_negotiation import accepted_ranges, quality_of


@pytest.mark.parametrize(
    ("accept", "quality"),
    [
        ("application/json", 1.0),
        ("application/json;q=0.5", 0.5),
        ("text/html, application/*;q=0.3", 0.3),
        ("*/*;q=0.1", 0.1),
        ("application/json;q=0, */*", 0.0),  # the exact range outranks the wildcard, whatever their order
        ("*/*, application/*;q=0.2, application/json;q=0.7", 0.7),
        ("application/json;q=0.2, application/json;q=0.9", 0.9),
        ("APPLICATION/Json; Q=0.4", 0.4),
        ("application/json; charset=utf-8; q=0.6", 0.6),
        ("text/html", 0.0),
        ("application/json;q=1.5", 0.0),  # no qvalue: the range is malformed and admits nothing
        ("json", 0.0),
    ],
)
def test_the_most_specific_matching_range_gives_the_quality(accept, quality) -> None:
    assert quality_of("application/json", accepted_ranges([accept])) == quality
