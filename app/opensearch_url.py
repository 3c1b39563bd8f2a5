"""What `OPENSEARCH_URL` may hold, checked when the settings load: one line naming the problem.

Refused there in one line, not as a traceback from the first request the client sends at start. Never the
value itself in a message: `https://user:password@host` is how credentials are put in it.
"""

from __future__ import annotations

from urllib.parse import SplitResult, urlsplit


def opensearch_url_problem(text: str) -> str | None:
    """Why `text` is no http(s) URL opensearch-py can reach, or None.

    opensearch-py takes `host:port` without a scheme as http; so does this check.
    """
    parsed = urlsplit(text if "://" in text else f"http://{text}")
    got = None
    if parsed.scheme not in {"http", "https"}:
        got = f"the scheme {parsed.scheme!r}"
    elif any(character.isspace() for character in text):
        got = "a space inside it"
    elif not parsed.hostname:
        got = "no host"
    elif _bad_port(parsed):
        got = "a port that is not a number from 1 to 65535"
    return None if got is None else f"expected an http(s) URL such as https://opensearch:9200, got {got}"


def _bad_port(url: SplitResult) -> bool:
    """Whether what stands after the host's `:` is no port number from 1 to 65535 (no port at all is fine)."""
    try:
        return url.port == 0
    except ValueError:  # not a number, or out of range
        return True
