"""What an SRE sees of each request: the opt-in access log, unmatched routes in the HTTP metrics, 403s held."""

from __future__ import annotations

import io
import json
import logging
import time
from typing import TYPE_CHECKING, Any

import jwt
import pytest

from app.api.access_log import ACCESS_LOGGER
from app.observability.logs import (
    AUTH_LOGGER,
    SERVER_LOGGER,
    THIRD_PARTY_LOGGERS,
    TRACE_HEADER_LOGGERS,
    configure_logging,
)
from tests.ops.conftest import CORPUS, sample

if TYPE_CHECKING:
    from collections.abc import Iterator

CALLER_TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
SECRET_WORD = "quokkaheronSECRET"
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
    logging.getLogger(ACCESS_LOGGER).propagate = True
    yield stream
    root.handlers[:] = handlers
    root.setLevel(level)
    for name, (logger_level, filters, propagate) in saved.items():
        loggers[name].setLevel(logger_level)
        loggers[name].filters[:] = filters
        loggers[name].propagate = propagate


def access_lines(stream: io.StringIO) -> list[dict[str, Any]]:
    entries = [json.loads(line) for line in stream.getvalue().splitlines()]
    return [entry for entry in entries if entry["logger"] == ACCESS_LOGGER]


def token(**claims: Any) -> dict[str, str]:
    now = int(time.time())
    body = {"sub": "agent-7", "iat": now, "exp": now + 600, "scope": "search ingest", **claims}
    return {"authorization": "Bearer " + jwt.encode(body, SECRET, algorithm="HS256")}


async def test_no_access_line_is_written_by_default(ops_app, unique_name, log_stream) -> None:
    async with ops_app.client() as client:
        await client.get("/healthz")
        await client.get(f"/v1/projects/{unique_name}/documents/missing")

    assert access_lines(log_stream) == []


async def test_each_request_is_one_line_by_route_template_status_duration_and_bytes(
    ops_app, unique_name, log_stream
) -> None:
    async with ops_app.client(access_log_enabled=True) as client:
        written = await client.post(f"/v1/projects/{unique_name}/documents", json={"documents": [CORPUS[0]]})
        read = await client.get(
            f"/v1/projects/{unique_name}/documents/cache",
            headers={"traceparent": f"00-{CALLER_TRACE_ID}-00f067aa0ba902b7-01", "x-request-id": "agent-run-9"},
        )
        searched = await client.get("/memory/query", params={"query": SECRET_WORD, "project": unique_name})
        unknown = await client.get(f"/v1/nowhere/{SECRET_WORD}")
        wrong_method = await client.put("/healthz")
        head = await client.head("/healthz")

    lines = access_lines(log_stream)
    assert [(line["method"], line["route"], line["status"]) for line in lines] == [
        ("POST", "/v1/projects/{project}/documents", 201),
        ("GET", "/v1/projects/{project}/documents/{document_id}", 200),
        ("GET", "/memory/query", 200),
        ("GET", "<unmatched>", 404),
        ("PUT", "<unmatched>", 405),
        ("HEAD", "/healthz", 200),
    ]
    responses = (written, read, searched, unknown, wrong_method, head)
    assert [line["response_bytes"] for line in lines] == [len(response.content) for response in responses]
    assert [line["request_id"] for line in lines] == [response.headers["x-request-id"] for response in responses]
    assert lines[1]["request_id"] == "agent-run-9"
    assert lines[1]["trace_id"] == CALLER_TRACE_ID
    assert [line["project"] for line in lines] == [unique_name, unique_name, unique_name, None, None, None]
    assert all(line["subject"] is None for line in lines)  # AUTH_MODE=off: nobody authenticated
    assert all(line["duration_ms"] >= 0 for line in lines)
    assert head.content == b""
    # The caller's words and ids stay out: the route's template, never the path or the query string.
    assert SECRET_WORD.lower() not in log_stream.getvalue().lower()
    assert "cache" not in json.dumps(lines[1])


JWT_SETTINGS: dict[str, Any] = {
    "auth_mode": "jwt",
    "jwt_secret": SECRET,
    "rate_limit_refused_auth_per_address_rps": 0.0,
}


async def test_the_line_names_the_authenticated_subject_and_the_project(ops_app, unique_name, log_stream) -> None:
    async with ops_app.client(access_log_enabled=True, **JWT_SETTINGS) as client:
        allowed = await client.get(f"/v1/projects/{unique_name}/documents/x", headers=token(projects=[unique_name]))
        refused = [
            await client.get(f"/v1/projects/{unique_name}/documents/x", headers=token(projects=["elsewhere"]))
            for _ in range(20)
        ]
        anonymous = await client.get(f"/v1/projects/{unique_name}/documents/x")

    assert allowed.status_code == 404
    assert {response.status_code for response in refused} == {403}
    assert anonymous.status_code == 401
    lines = access_lines(log_stream)
    assert [(line["status"], line["subject"], line["project"]) for line in lines] == [
        (404, "agent-7", unique_name),
        *[(403, "agent-7", unique_name)] * 20,
        (401, None, None),
    ]


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


async def test_a_head_is_counted_as_head_not_as_the_get_that_serves_it(ops_app) -> None:
    head = {"app_name": "poimen", "path": "/healthz", "status_code": "200"}
    heads_before = sample("poimen_http_requests_total", method="HEAD", **head)
    gets_before = sample("poimen_http_requests_total", method="GET", **head)
    async with ops_app.client() as client:
        for _ in range(3):
            assert (await client.head("/healthz")).status_code == 200

    assert sample("poimen_http_requests_total", method="HEAD", **head) == heads_before + 3
    assert sample("poimen_http_requests_total", method="GET", **head) == gets_before  # was counted as 3 GETs
