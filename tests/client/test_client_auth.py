"""Bearer tokens against a live service with AUTH_MODE=jwt (HS256): 401 and 403 become typed errors."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import jwt
import pytest
from poimen_client.clients import AsyncPoimenClient, PoimenClient
from poimen_client.errors import ForbiddenError, UnauthorizedError
from poimen_client.models import Document

from tests.client.conftest import JWT_SECRET, live_service

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = pytest.mark.integration


def test_a_token_granting_the_project_writes_and_reads(jwt_service_url: str, make_token, unique_name: str) -> None:
    token = make_token(projects=[unique_name], scope="search ingest")

    with PoimenClient(jwt_service_url, token=token) as client:
        client.ingest(unique_name, Document(id="a", text="# A\n\nAlpha."))
        stats = client.project_stats(unique_name)

    assert stats.documents == 1


def test_no_token_raises_unauthorized_saying_none_was_sent(jwt_service_url: str, unique_name: str) -> None:
    with PoimenClient(jwt_service_url) as client, pytest.raises(UnauthorizedError) as raised:
        client.project_stats(unique_name)

    assert raised.value.status == 401
    assert "no token was sent" in str(raised.value)


def test_an_expired_token_raises_unauthorized_saying_when_it_expired(
    jwt_service_url: str, make_token, unique_name: str
) -> None:
    token = make_token(expires_in_s=-600)  # beyond the service's leeway

    with PoimenClient(jwt_service_url, token=token) as client, pytest.raises(UnauthorizedError) as raised:
        client.project_stats(unique_name)

    assert "the token expired at" in str(raised.value)
    assert token not in str(raised.value)


def test_a_token_for_another_project_raises_forbidden(jwt_service_url: str, make_token, unique_name: str) -> None:
    token = make_token(projects=["someone-else"])

    with PoimenClient(jwt_service_url, token=token) as client, pytest.raises(ForbiddenError) as raised:
        client.list_documents(unique_name)

    assert raised.value.status == 403
    assert "does not grant access to this project" in raised.value.detail


def test_a_search_token_cannot_delete_a_project(jwt_service_url: str, make_token, unique_name: str) -> None:
    token = make_token(scope="search")

    with PoimenClient(jwt_service_url, token=token) as client, pytest.raises(ForbiddenError) as raised:
        client.delete_project(unique_name)

    assert "'admin'" in raised.value.detail


def test_a_token_function_is_asked_before_every_request(jwt_service_url: str, make_token, unique_name: str) -> None:
    issued: list[str] = []

    def fresh_token() -> str:
        issued.append(make_token(projects=[unique_name]))
        return issued[-1]

    with PoimenClient(jwt_service_url, token=fresh_token) as client:
        client.project_stats(unique_name)
        client.project_stats(unique_name)

    assert len(issued) == 2


async def test_the_async_client_sends_the_token(jwt_service_url: str, make_token, unique_name: str) -> None:
    async with AsyncPoimenClient(jwt_service_url, token=make_token(projects=[unique_name])) as client:
        page = await client.list_documents(unique_name)

    assert page.items == []


def test_a_token_read_with_its_newline_or_a_bearer_prefix_is_sent_as_the_token(
    jwt_service_url: str, make_token, unique_name: str
) -> None:
    token = make_token(projects=[unique_name], scope="search ingest")
    for pasted in (f"{token}\n", f"Bearer {token}", f"  bearer {token} "):
        with PoimenClient(jwt_service_url, token=pasted) as client:
            assert client.search(unique_name, "anything").results == []


@pytest.mark.parametrize("bad", ["", "  ", "Bearer ", "abc\u201cdef", None])
def test_an_unsendable_token_is_a_value_error_that_does_not_quote_it(jwt_service_url: str, bad: object) -> None:
    with PoimenClient(jwt_service_url, token=lambda: bad) as client, pytest.raises(ValueError) as raised:  # type: ignore[arg-type,return-value]
        client.list_projects()
    assert "abc" not in str(raised.value)


@pytest.fixture(scope="module")
def refusals_limited_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A live AUTH_MODE=jwt service whose addresses may be refused once, then again only after 20 s (429 till then).

    Each test is a client address of its own (`X-Forwarded-For`, trusted from loopback by default).
    """
    log_path = tmp_path_factory.mktemp("client-refusals-service") / "serve.log"
    limited = {"RATE_LIMIT_REFUSED_AUTH_PER_ADDRESS_RPS": "0.05", "RATE_LIMIT_REFUSED_AUTH_BURST": "1"}
    with live_service(log_path, AUTH_MODE="jwt", JWT_SECRET=JWT_SECRET, **limited) as service:
        yield service.url


def test_a_refused_token_past_its_address_limit_raises_unauthorized_at_once_not_retried(
    refusals_limited_url: str, unique_name: str
) -> None:
    # The 429's Retry-After (20 s) is within RetryPolicy.max_delay_s: it was slept on and the same bad token sent again.
    sends: list[str] = []

    def wrong_key_token() -> str:
        sends.append("sent")
        claims = {"sub": "agent", "exp": int(time.time()) + 300, "projects": "*", "scope": "search"}
        return jwt.encode(claims, "a-key-the-service-does-not-hold-of-32-bytes", algorithm="HS256")

    address = {"x-forwarded-for": "203.0.113.41"}
    with PoimenClient(refusals_limited_url, token=wrong_key_token, headers=address) as client:
        with pytest.raises(UnauthorizedError) as refused:
            client.project_stats(unique_name)
        with pytest.raises(UnauthorizedError) as locked_out:
            client.project_stats(unique_name)

    assert (refused.value.status, locked_out.value.status) == (401, 429)
    assert len(sends) == 2
    assert locked_out.value.problem.refused_status == 401
    assert locked_out.value.retry_after_s is not None
    assert "signature is invalid" in locked_out.value.detail


async def test_a_forbidden_token_past_its_address_limit_raises_forbidden_at_once_not_retried(
    refusals_limited_url: str, unique_name: str
) -> None:
    sends: list[str] = []

    def other_project_token() -> str:
        sends.append("sent")
        claims = {"sub": "agent", "exp": int(time.time()) + 300, "projects": ["someone-else"], "scope": "search"}
        return jwt.encode(claims, JWT_SECRET, algorithm="HS256")

    address = {"x-forwarded-for": "203.0.113.42"}
    async with AsyncPoimenClient(refusals_limited_url, token=other_project_token, headers=address) as client:
        with pytest.raises(ForbiddenError):
            await client.list_documents(unique_name)
        with pytest.raises(ForbiddenError) as locked_out:
            await client.list_documents(unique_name)

    assert locked_out.value.status == 429
    assert len(sends) == 2
    assert locked_out.value.problem.refused_status == 403
