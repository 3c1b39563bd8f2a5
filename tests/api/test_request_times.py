"""Every time a request carries is read by one rule: the same text gets the same answer wherever it is sent.

RFC 3339 with digits past the microsecond dropped, never rounded (`app.api.microsecond_times`). Rounding took
`9999-12-31T23:59:59.9999999Z` past year 9999: `GET /memory/query?as_of=` took it while `POST /v1/search`
and the documents listing's `updated_since` answered 400.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import pytest

from tests.api.conftest import api_settings, app_client, build_engines

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

    from litestar import Litestar
    from litestar.testing import AsyncTestClient

    from app.engines.embedder import ServingEmbedder

PROJECT = "request-times"


@pytest.fixture(scope="module")
async def client(
    api_postgres_url: str, embedder: ServingEmbedder, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[AsyncTestClient[Litestar]]:
    data_dir = tmp_path_factory.mktemp("request_times")
    async with (
        build_engines(database_url=api_postgres_url, lexical_path=data_dir / "lexical", embedder=embedder) as built,
        app_client(built.app(api_settings(data_dir))) as test_client,
    ):
        written = await test_client.post(f"/v1/projects/{PROJECT}/documents", json={"id": "a", "text": "Port notes."})
        assert written.status_code == 201, written.text
        yield test_client


def _search(body: dict[str, Any]) -> Callable[[Any, str], Awaitable[Any]]:
    async def send(client: Any, time: str) -> Any:
        filled = {key: (time if value is None else value) for key, value in body.items()}
        return await client.post("/v1/search", json={"query": "port notes last week", "project": PROJECT, **filled})

    return send


def _search_filter(name: str) -> Callable[[Any, str], Awaitable[Any]]:
    async def send(client: Any, time: str) -> Any:
        return await client.post("/v1/search", json={"query": "port", "project": PROJECT, "filters": {name: time}})

    return send


async def _batch_as_of(client: Any, time: str) -> Any:
    body = {"project": PROJECT, "queries": [{"query": "port last week", "as_of": time, "filters": {"date_to": time}}]}
    return await client.post("/v1/search/batch", json=body)


def _query_string(path: str, name: str, *, method: str = "GET") -> Callable[[Any, str], Awaitable[Any]]:
    async def send(client: Any, time: str) -> Any:
        return await client.request(method, f"{path}{name}={quote(time, safe='')}")

    return send


PLACES = {
    "POST /v1/search as_of": _search({"as_of": None}),
    "POST /v1/search filters.date_from": _search_filter("date_from"),
    "POST /v1/search filters.date_to": _search_filter("date_to"),
    "POST /v1/search/batch": _batch_as_of,
    "GET /memory/query as_of": _query_string(f"/memory/query?query=port+last+week&project={PROJECT}&", "as_of"),
    "GET documents updated_since": _query_string(f"/v1/projects/{PROJECT}/documents?", "updated_since"),
    "GET documents event_time_from": _query_string(f"/v1/projects/{PROJECT}/documents?", "event_time_from"),
    "DELETE documents event_time_to": _query_string(
        f"/v1/projects/{PROJECT}/documents?source_prefix=nowhere/&", "event_time_to", method="DELETE"
    ),
}


@pytest.mark.parametrize(
    ("time", "status"),
    [
        ("9999-12-31T23:59:59.9999999Z", 200),  # the last microsecond of year 9999, not year 10000
        ("9999-12-31T23:59:59.99999999+01:00", 200),
        ("9999-12-31T23:59:59.999999Z", 200),
        ("2024-05-08T12:00:00.1234567Z", 200),
        ("2024-05-08T12:00:00+00:00", 200),
        ("2024-05-08t12:00:00z", 200),  # RFC 3339 5.6 allows the lowercase letters
        ("0001-01-01T00:00:00Z", 200),
        ("2024-05-08T12:00Z", 400),  # no seconds
        ("2024-05-08", 400),  # a date alone
        ("2024-05-08T24:00:00Z", 400),
        ("10000-01-01T00:00:00Z", 400),
    ],
)
async def test_a_time_gets_the_same_answer_wherever_a_request_carries_it(client, time, status) -> None:
    answers = {place: (await send(client, time)).status_code for place, send in PLACES.items()}

    assert answers == dict.fromkeys(PLACES, status)
