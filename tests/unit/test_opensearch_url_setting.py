"""OPENSEARCH_URL is checked when the settings load, in one line that never shows its credentials.

The refusal echoed the whole value (`got 'htps://admin:s3cretpw@opensearch:9200'`), and a port that is no
number passed, to end the start as `ValueError: Port could not be cast to integer value as 'abc'`.
"""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from app.config import Settings, describe_validation_error

PASSWORD = "s3cretpw"


@pytest.mark.parametrize(
    ("url", "says"),
    [
        (f"htps://admin:{PASSWORD}@opensearch:9200", "got the scheme 'htps'"),
        (f"https://admin:{PASSWORD}@opensearch :9200", "got a space inside it"),
        (f"https://admin:{PASSWORD}@:9200", "got no host"),
        (f"https://admin:{PASSWORD}@opensearch:abc", "got a port that is not a number from 1 to 65535"),
        (f"https://admin:{PASSWORD}@opensearch:99999", "got a port that is not a number from 1 to 65535"),
    ],
)
def test_a_url_that_is_no_http_url_is_refused_without_showing_it(url: str, says: str) -> None:
    with pytest.raises(ValidationError) as raised:
        Settings(_env_file=None, opensearch_url=url)  # type: ignore[call-arg]
    line = describe_validation_error(raised.value)

    assert line.startswith("invalid configuration: OPENSEARCH_URL: "), line
    assert says in line
    assert PASSWORD not in line


@pytest.mark.parametrize(
    "url", ["https://admin:pw@opensearch:9200", "http://opensearch", "opensearch:9200", "https://[::1]:9200/"]
)
def test_an_http_url_is_accepted(url: str) -> None:
    assert Settings(_env_file=None, opensearch_url=url).opensearch_url == url  # type: ignore[call-arg]
