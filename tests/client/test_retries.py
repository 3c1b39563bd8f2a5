"""Retries and errors against a real loopback HTTP server that answers from a script (no mocks of httpx)."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import TYPE_CHECKING

import httpx
import pytest
from poimen_client.clients import AsyncPoimenClient, PoimenClient
from poimen_client.errors import (
    ForbiddenError,
    InvalidRequestError,
    RateLimitedError,
    RequestTimeoutError,
    StorageFullError,
    TransportError,
    UnauthorizedError,
    UnavailableError,
    UnexpectedAnswerError,
)
from poimen_client.models import Document
from poimen_client.retries import RetryPolicy, retry_after_seconds

from tests.client.scripted_server import LIVE, PROBLEM
from tests.integration.conftest import free_port

if TYPE_CHECKING:
    from tests.client.scripted_server import ScriptedServer

TOLERANCE_S = 0.05  # sleep() may wake a little early on a loaded machine's clock


def test_503_with_retry_after_is_retried_after_the_given_seconds(server: ScriptedServer) -> None:
    server.script = [(503, {"Retry-After": "1"}, {}), (503, {"Retry-After": "1"}, {}), LIVE]

    with PoimenClient(server.url) as client:
        answer = client.liveness()

    assert answer.status == "ok"
    assert len(server.arrivals) == 3
    assert all(gap >= 1.0 - TOLERANCE_S for gap in server.gaps_s())


def test_a_504_is_retried_after_its_retry_after(server: ScriptedServer) -> None:
    # The service answers an engine's timeout 504 with Retry-After: 1; the client raised it at once.
    problem = {"title": "Engine timed out", "status": 504, "detail": "pgvector timed out", "engine": "pgvector"}
    server.script = [(504, {**PROBLEM, "Retry-After": "1"}, problem), (200, {}, {"results": []})]

    with PoimenClient(server.url) as client:
        answer = client.search_batch("p", ["port"])

    assert answer.results == []
    assert len(server.arrivals) == 2
    assert server.gaps_s()[0] >= 1.0 - TOLERANCE_S


def test_a_proxys_504_without_retry_after_backs_off_until_max_attempts(server: ScriptedServer) -> None:
    server.script = [(504, {"Content-Type": "text/html"}, "<html>Gateway Timeout</html>")]

    retry = RetryPolicy(max_attempts=3, base_delay_s=0.01)
    with PoimenClient(server.url, retry=retry) as client, pytest.raises(UnavailableError) as raised:
        client.project_stats("p")

    assert len(server.arrivals) == 3
    assert raised.value.status == 504
    assert "<html>Gateway Timeout</html>" in str(raised.value)


def test_a_proxys_502_is_retried_as_a_503_is(server: ScriptedServer) -> None:
    # An ingress answers 502 while the pod behind it restarts; the client raised it at once.
    server.script = [(502, {"Content-Type": "text/html"}, "<html>Bad Gateway</html>"), (200, {}, {"results": []})]

    with PoimenClient(server.url, retry=RetryPolicy(base_delay_s=0.01)) as client:
        answer = client.search_batch("p", ["port"])

    assert answer.results == []
    assert len(server.arrivals) == 2


def test_a_write_after_a_502_is_sent_again_identically(server: ScriptedServer) -> None:
    # Every write names its document (or selection) itself, so sending it again cannot write it twice.
    outcome = {"id": "d", "status": "unchanged", "chunks": 1, "embedded": 0, "version": 1}
    server.script = [(502, {}, ""), (201, {}, {"project": "p", "documents": [outcome]})]

    with PoimenClient(server.url, retry=RetryPolicy(base_delay_s=0.01)) as client:
        answer = client.ingest("p", Document(id="d", text="t"), if_match=1)

    assert answer.documents[0].status == "unchanged"
    assert [(arrival.method, arrival.path) for arrival in server.arrivals] == [("POST", "/v1/projects/p/documents")] * 2
    assert server.arrivals[0].body == server.arrivals[1].body


def test_429_without_retry_after_backs_off_exponentially(server: ScriptedServer) -> None:
    server.script = [(429, {}, {}), (429, {}, {}), LIVE]

    with PoimenClient(server.url, retry=RetryPolicy(base_delay_s=0.2)) as client:
        client.liveness()

    first, second = server.gaps_s()
    assert first >= 0.1 - TOLERANCE_S  # 0.2 s scaled by a jitter factor in [0.5, 1]
    assert second >= 0.2 - TOLERANCE_S  # 0.4 s scaled likewise


def test_a_429_for_a_refused_token_is_raised_at_once_by_its_refused_status_not_its_words(
    server: ScriptedServer,
) -> None:
    refused = {"title": "Too many requests", "status": 429, "detail": "slow down", "refused_status": 403}
    server.script = [(429, {**PROBLEM, "Retry-After": "0"}, refused), LIVE]

    with PoimenClient(server.url) as client, pytest.raises(ForbiddenError) as raised:
        client.liveness()

    assert len(server.arrivals) == 1
    assert raised.value.status == 429
    assert raised.value.retry_after_s == 0.0
    assert "the token was refused: 403" in str(raised.value)


def test_a_429_with_a_refused_status_that_is_no_refusal_is_retried(server: ScriptedServer) -> None:
    server.script = [(429, {**PROBLEM, "Retry-After": "0"}, {"status": 429, "refused_status": 500}), LIVE]

    with PoimenClient(server.url) as client:
        answer = client.liveness()

    assert answer.status == "ok"
    assert len(server.arrivals) == 2


def test_a_retried_request_is_sent_again_identically(server: ScriptedServer) -> None:
    server.script = [(503, {"Retry-After": "0"}, {}), (200, {}, {"results": []})]

    with PoimenClient(server.url) as client:
        client.search_batch("p", ["first", "second"])

    assert [(arrival.method, arrival.path) for arrival in server.arrivals] == [("POST", "/v1/search/batch")] * 2
    assert server.arrivals[0].body == server.arrivals[1].body
    assert json.loads(server.arrivals[0].body) == {"project": "p", "queries": [{"query": "first"}, {"query": "second"}]}


def test_retries_stop_after_max_attempts_with_the_engines_reasons(server: ScriptedServer) -> None:
    reasons = ["semantic: EngineUnavailableError", "lexical: EngineTimeoutError"]
    problem = {"title": "Search unavailable", "status": 503, "detail": "every engine failed", "reasons": reasons}
    server.script = [(503, PROBLEM, problem)]

    retry = RetryPolicy(max_attempts=3, base_delay_s=0.01)
    with PoimenClient(server.url, retry=retry) as client, pytest.raises(UnavailableError) as raised:
        client.search("p", "q")

    assert len(server.arrivals) == 3
    assert raised.value.reasons == reasons
    assert str(raised.value) == (
        "503 Search unavailable on POST /v1/search: every engine failed "
        "[reasons: semantic: EngineUnavailableError; lexical: EngineTimeoutError]"
    )


def test_a_full_disk_is_unavailable_naming_the_engine_and_not_retried(server: ScriptedServer) -> None:
    # The body `app/api/errors.py` writes for EngineStorageFullError; it was a bare ServiceError.
    detail = "pgvector has no space left on its disk: nothing can be written until space is freed"
    problem = {"type": "about:blank", "title": "Insufficient storage", "status": 507, "detail": detail}
    server.script = [(507, PROBLEM, {**problem, "engine": "pgvector"}), LIVE]

    with PoimenClient(server.url) as client, pytest.raises(UnavailableError) as raised:
        client.ingest("p", Document(id="d", text="t"))

    assert isinstance(raised.value, StorageFullError)
    assert raised.value.status == 507
    assert raised.value.engine == "pgvector"
    assert raised.value.retry_after_s is None
    assert len(server.arrivals) == 1
    assert (
        str(raised.value) == f"507 Insufficient storage on POST /v1/projects/p/documents: {detail} [engine: pgvector]"
    )


@pytest.mark.parametrize(("status", "title"), [(503, "Engine unavailable"), (504, "Engine timed out")])
def test_an_engine_failure_names_the_engine(server: ScriptedServer, status: int, title: str) -> None:
    problem = {"title": title, "status": status, "detail": "the tantivy engine failed", "engine": "tantivy"}
    server.script = [(status, PROBLEM, problem)]

    with (
        PoimenClient(server.url, retry=RetryPolicy(max_attempts=1)) as client,
        pytest.raises(UnavailableError) as raised,
    ):
        client.search("p", "q")

    assert raised.value.engine == "tantivy"
    assert "[engine: tantivy]" in str(raised.value)


def unsigned_token(payload: str) -> str:
    """A JWT-shaped token whose payload is `payload` (JSON, or not); the client reads it, never verifies it."""
    return f"e30.{base64.urlsafe_b64encode(payload.encode()).decode().rstrip('=')}.c2ln"


@pytest.mark.parametrize(
    ("payload", "hint"),
    [
        ('{"exp": -1e20}', "(the token's exp claim is long past, before any date)"),
        ('{"exp": -100000000000000000000000000000}', "(the token's exp claim is long past, before any date)"),
        ('{"exp": -Infinity}', "(the token's exp claim is long past, before any date)"),
        ('{"exp": -62135596801}', "(the token's exp claim is long past, before any date)"),  # 1 s before year 1
        ('{"exp": 1e400}', "[request id"),  # read as infinity: not expired, no hint
        ('{"exp": NaN}', "[request id"),
        ('{"exp": true}', "[request id"),
        ("[" * 10_000, "[request id"),  # deeper than json's recursion limit
    ],
)
def test_a_401_is_unauthorized_whatever_the_tokens_exp_holds(server: ScriptedServer, payload: str, hint: str) -> None:
    # An `exp` no datetime can hold raised OverflowError or ValueError from the hint, instead of the 401.
    problem = {"title": "Unauthorized", "status": 401, "detail": "invalid token"}
    server.script = [(401, {**PROBLEM, "X-Request-Id": "r1"}, problem)]
    token = unsigned_token(payload)

    with PoimenClient(server.url, token=token) as client, pytest.raises(UnauthorizedError) as raised:
        client.list_projects()

    assert str(raised.value).startswith(f"401 Unauthorized on GET /v1/projects: invalid token {hint}")
    assert token.split(".")[1] not in str(raised.value)


def test_retry_after_beyond_the_bound_raises_at_once(server: ScriptedServer) -> None:
    server.script = [(429, {"Retry-After": "120"}, {"title": "Too Many Requests", "detail": "slow down"})]

    with (
        PoimenClient(server.url, retry=RetryPolicy(max_delay_s=5.0)) as client,
        pytest.raises(RateLimitedError) as raised,
    ):
        client.liveness()

    assert len(server.arrivals) == 1
    assert raised.value.retry_after_s == 120.0
    assert "[retry after 120 s]" in str(raised.value)


@pytest.mark.parametrize("when", ["86400", "HTTP-date a day ahead"])
def test_a_retry_after_of_a_day_is_raised_at_once_by_the_default_policy(server: ScriptedServer, when: str) -> None:
    if when != "86400":
        when = format_datetime(datetime.now(UTC) + timedelta(days=1), usegmt=True)
    server.script = [(503, {"Retry-After": when}, {}), LIVE]

    with PoimenClient(server.url) as client, pytest.raises(UnavailableError) as raised:
        client.liveness()

    assert len(server.arrivals) == 1
    assert raised.value.retry_after_s is not None
    assert raised.value.retry_after_s > RetryPolicy().max_delay_s


def test_max_attempts_of_one_never_retries(server: ScriptedServer) -> None:
    server.script = [(503, {"Retry-After": "0"}, {}), LIVE]

    with PoimenClient(server.url, retry=RetryPolicy(max_attempts=1)) as client, pytest.raises(UnavailableError):
        client.liveness()

    assert len(server.arrivals) == 1


def test_other_errors_are_not_retried(server: ScriptedServer) -> None:
    problem = {"title": "Invalid request", "status": 400, "detail": "limit: too big", "field": "limit"}
    server.script = [(400, PROBLEM, problem), LIVE]

    with PoimenClient(server.url) as client, pytest.raises(InvalidRequestError) as raised:
        client.search("p", "q")

    assert len(server.arrivals) == 1
    assert raised.value.field == "limit"


@pytest.mark.parametrize("status", [406, 415])
def test_a_406_or_415_is_an_invalid_request_with_the_services_words_not_retried(
    server: ScriptedServer, status: int
) -> None:
    # A service honouring `Accept` answers 406 for a request whose Accept admits no JSON (a proxy or a
    # caller's headers= can set one); it was a bare ServiceError, the one status of the document without a class.
    detail = "this route answers application/json or application/problem+json; Accept admits neither"
    problem = {"title": "Not Acceptable", "status": status, "detail": detail}
    server.script = [(status, PROBLEM, problem), LIVE]

    with PoimenClient(server.url) as client, pytest.raises(InvalidRequestError) as raised:
        client.project_stats("p")

    assert len(server.arrivals) == 1
    assert raised.value.status == status
    assert raised.value.detail == detail
    assert f"{status} Not Acceptable on GET /v1/projects/p: {detail}" in str(raised.value)


def test_a_408_is_a_request_timeout_error_and_not_retried(server: ScriptedServer) -> None:
    # The body `app/api/overload.py` writes for a body that came too slowly; it was a bare ServiceError.
    detail = "the request body did not arrive in time: 20 s, plus 1 s for each 16384 bytes received"
    problem = {"type": "about:blank", "title": "Request timeout", "status": 408, "detail": detail}
    server.script = [(408, {**PROBLEM, "Connection": "close"}, problem), LIVE]

    with PoimenClient(server.url) as client, pytest.raises(RequestTimeoutError) as raised:
        client.ingest("p", Document(id="d", text="t"))

    assert raised.value.status == 408
    assert len(server.arrivals) == 1
    assert str(raised.value) == f"408 Request timeout on POST /v1/projects/p/documents: {detail}"


def test_not_ready_is_an_answer_and_not_retried(server: ScriptedServer) -> None:
    server.script = [(503, {}, {"status": "not ready", "checks": {"store": "down: EngineUnavailableError"}}), LIVE]

    with PoimenClient(server.url) as client:
        readiness = client.readiness()

    assert readiness.status == "not ready"
    assert readiness.checks == {"store": "down: EngineUnavailableError"}
    assert len(server.arrivals) == 1


def test_not_ready_from_a_proxy_page_is_unavailable_not_an_unexpected_answer(server: ScriptedServer) -> None:
    server.script = [(503, {"Content-Type": "text/html"}, "<html>Service Unavailable</html>")]

    with PoimenClient(server.url) as client, pytest.raises(UnavailableError) as raised:
        client.readiness()

    assert raised.value.status == 503
    assert "<html>Service Unavailable</html>" in str(raised.value)
    assert len(server.arrivals) == 1


def test_an_error_without_a_problem_body_quotes_the_body(server: ScriptedServer) -> None:
    server.script = [(502, {"Content-Type": "text/html"}, "<html>Bad Gateway</html>")]

    with (
        PoimenClient(server.url, retry=RetryPolicy(max_attempts=1)) as client,
        pytest.raises(UnavailableError) as raised,
    ):
        client.project_stats("p")

    assert raised.value.status == 502
    assert "(not a problem+json body) <html>Bad Gateway</html>" in str(raised.value)


def test_an_ingest_outcome_of_a_status_a_newer_service_added_is_read(server: ScriptedServer) -> None:
    # A newer service's new outcome status failed the whole answer (an UnexpectedAnswerError for a write that was
    # done), so an agent would send it again and fail again; an unknown field is ignored, an unknown status is kept.
    outcome = {"id": "d", "status": "merged", "chunks": 1, "embedded": 1, "version": 2, "merged_into": "e"}
    server.script = [(201, {}, {"project": "p", "documents": [outcome], "took_ms": 3})]

    with PoimenClient(server.url) as client:
        answer = client.ingest("p", Document(id="d", text="t"))

    assert answer.documents[0].status == "merged"
    assert answer.documents[0].version == 2


def test_a_success_of_another_shape_raises_unexpected_answer(server: ScriptedServer) -> None:
    server.script = [(200, {}, {"project": "p", "documents": "many"})]

    with PoimenClient(server.url) as client, pytest.raises(UnexpectedAnswerError) as raised:
        client.project_stats("p")

    assert "unexpected answer to GET /v1/projects/p" in str(raised.value)


DEEPLY_NESTED = '{"a":' * 100_000  # deeper than msgspec's recursion limit


def test_a_success_nested_too_deep_raises_unexpected_answer(server: ScriptedServer) -> None:
    # msgspec's RecursionError escaped the client.
    server.script = [(200, {}, DEEPLY_NESTED)]

    with PoimenClient(server.url) as client, pytest.raises(UnexpectedAnswerError) as raised:
        client.flags()

    assert "unexpected answer to GET /admin/flags" in str(raised.value)


def test_an_error_nested_too_deep_raises_its_status_error(server: ScriptedServer) -> None:
    server.script = [(502, {}, DEEPLY_NESTED)]

    with (
        PoimenClient(server.url, retry=RetryPolicy(max_attempts=1)) as client,
        pytest.raises(UnavailableError) as raised,
    ):
        client.project_stats("p")

    assert raised.value.status == 502
    assert '(not a problem+json body) {"a":{"a":' in str(raised.value)


@pytest.mark.parametrize("status", [200, 503])
def test_a_body_its_content_encoding_does_not_decode_raises_unexpected_answer(
    server: ScriptedServer, status: int
) -> None:
    # httpx.DecodingError escaped the client: it is no TransportError.
    server.script = [(status, {"Content-Encoding": "gzip"}, "not gzip at all")]

    with (
        PoimenClient(server.url, retry=RetryPolicy(max_attempts=1)) as client,
        pytest.raises(UnexpectedAnswerError) as raised,
    ):
        client.liveness()

    assert f"GET {server.url}/healthz answered a body that does not decode" in str(raised.value)


async def test_the_async_client_retries_after_retry_after(server: ScriptedServer) -> None:
    server.script = [(503, {"Retry-After": "1"}, {}), LIVE]

    async with AsyncPoimenClient(server.url) as client:
        answer = await client.liveness()

    assert answer.status == "ok"
    assert server.gaps_s()[0] >= 1.0 - TOLERANCE_S


def test_an_unreachable_service_raises_a_transport_error_naming_the_url() -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there

    with PoimenClient(url) as client, pytest.raises(TransportError) as raised:
        client.liveness()

    assert f"GET {url}/healthz failed: ConnectError" in str(raised.value)


def test_retry_after_as_an_http_date_counts_seconds_from_now() -> None:
    when = datetime.now(UTC) + timedelta(seconds=30)
    response = httpx.Response(503, headers={"Retry-After": format_datetime(when, usegmt=True)})

    seconds = retry_after_seconds(response)

    assert seconds is not None
    assert 28.0 <= seconds <= 30.0


@pytest.mark.parametrize("value", ["soon", "-1", ""])
def test_an_unreadable_retry_after_is_ignored(value: str) -> None:
    assert retry_after_seconds(httpx.Response(503, headers={"Retry-After": value})) is None


def test_a_retry_after_of_a_non_ascii_digit_is_ignored(server: ScriptedServer) -> None:
    # `²` (byte 0xB2) passed str.isdigit() and float() raised ValueError out of the call.
    server.script = [(503, {"Retry-After": "\u00b2"}, {}), LIVE]

    with PoimenClient(server.url, retry=RetryPolicy(base_delay_s=0.01)) as client:
        answer = client.liveness()

    assert answer.status == "ok"
    assert len(server.arrivals) == 2


def test_a_policy_without_attempts_is_refused() -> None:
    with pytest.raises(ValueError, match="max_attempts"):
        RetryPolicy(max_attempts=0)
