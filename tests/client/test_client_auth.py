"""Bearer tokens against a live service with AUTH_MODE=jwt (HS256): 401 and 403 become typed errors."""

from __future__ import annotations

import pytest
from poimen_client.clients import AsyncPoimenClient, PoimenClient
from poimen_client.errors import ForbiddenError, UnauthorizedError
from poimen_client.models import Document

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
