"""What an SRE sees of each request: unmatched routes in the HTTP metrics, 403 refusals held to a line per interval."""

from __future__ import annotations

import io
import json
import logging
import time
from typing import TYPE_CHECKING, Any

import jwt
import pytest

from app.observability.logs import (
    AUTH_LOGGER,
    SERVER_LOGGER,
    THIRD_PARTY_LOGGERS,
    TRACE_HEADER_LOGGERS,
    configure_logging,
)
from tests.ops.conftest import sample

if TYPE_CHECKING:
    from collections.abc import Iterator

SECRET = "access-log-secret-" + "0123456789abcdef" * 3
JWT_SETTINGS: dict[str, Any] = {
    "auth_mode": "jwt",
    "jwt_secret": SECRET,
    "rate_limit_refused_auth_per_address_rps": 0.0,
}


@pytest.fixture
def log_stream() -> Iterator[io.StringIO]:
    """The process's logging as `poimen serve` sets it up (JSON lines), into a buffer; restored after."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    names = (*THIRD_PARTY_LOGGERS, *TRACE_HEADER_LOGGERS, AUTH_LOGGER, SERVER_LOGGER)
    loggers = {name: logging.getLogger(name) for name in names}
    saved = {name: (logger.level, list(logger.filters), logger.propagate) for name, logger in loggers.items()}
    stream = io.StringIO()
    configure_logging("INFO", json=True, stream=stream)
    loggers[AUTH_LOGGER].propagate = True
    yield stream
    root.handlers[:] = handlers
    root.setLevel(level)
    for name, (logger_level, filters, propagate) in saved.items():
        loggers[name].setLevel(logger_level)
        loggers[name].filters[:] = filters
        loggers[name].propagate = propagate


def token(**claims: Any) -> dict[str, str]:
    now = int(time.time())
    body = {"sub": "agent-7", "iat": now, "exp": now + 600, "scope": "search ingest", **claims}
    return {"authorization": "Bearer " + jwt.encode(body, SECRET, algorithm="HS256")}


async def test_403_refusals_are_logged_once_per_reason_and_interval(ops_app, unique_name, log_stream) -> None:
    async with ops_app.client(**JWT_SETTINGS) as client:
        for scope in ("search", "ingest"):
            for _ in range(20):
                refused = await client.get(
                    f"/v1/projects/{unique_name}/documents/x", headers=token(projects=["elsewhere"], scope=scope)
                )
                assert refused.status_code == 403

    refusals = [json.loads(line) for line in log_stream.getvalue().splitlines() if "request refused: " in line]
    # Was one line per 403: anyone holding a valid token wrote a line per request. One per reason now.
    assert [(line["message"], line["subject"], line["project"]) for line in refusals] == [
        ("request refused: the token does not grant access to this project", "agent-7", unique_name),
        ("request refused: the token does not grant the 'search' scope", "agent-7", unique_name),
    ]


async def test_requests_no_route_matches_are_counted_under_one_bounded_route_label(ops_app) -> None:
    unmatched = {"app_name": "poimen", "path": "<unmatched>"}
    not_found_before = sample("poimen_http_requests_total", method="GET", status_code="404", **unmatched)
    not_allowed_before = sample("poimen_http_requests_total", method="DELETE", status_code="405", **unmatched)
    other_before = sample("poimen_http_requests_total", method="other", status_code="404", **unmatched)
    durations_before = sample(
        "poimen_http_request_duration_seconds_count", method="GET", status_code="404", **unmatched
    )
    async with ops_app.client() as client:
        for number in range(3):
            assert (await client.get(f"/wp-admin/{number}.php")).status_code == 404
        assert (await client.delete("/healthz")).status_code == 405
        assert (await client.request("PROPFIND", "/somewhere")).status_code == 404
        scrape = (await client.get("/metrics")).text

    assert sample("poimen_http_requests_total", method="GET", status_code="404", **unmatched) == not_found_before + 3
    assert sample("poimen_http_requests_total", method="DELETE", status_code="405", **unmatched) == (
        not_allowed_before + 1
    )
    assert sample("poimen_http_requests_total", method="other", status_code="404", **unmatched) == other_before + 1
    assert sample("poimen_http_request_duration_seconds_count", method="GET", status_code="404", **unmatched) == (
        durations_before + 3
    )
    assert "wp-admin" not in scrape
    assert "PROPFIND" not in scrape
