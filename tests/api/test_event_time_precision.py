"""Times are kept to the microsecond: digits past it are dropped, never rounded.

Rounding moved `2024-12-31T23:59:59.9999999Z` into 2025 (and a date filter for 2024 lost the document);
front matter's `date` was already truncated (`datetime.fromisoformat`). A document's `event_time`, and the
times a search (`date_from`, `date_to`, `as_of`) or a listing takes alike. One app on the real engines.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.api.conftest import api_settings, app_client, build_engines

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from litestar import Litestar
    from litestar.testing import AsyncTestClient

    from app.engines.embedder import ServingEmbedder


@pytest.fixture(scope="module")
async def client(
    api_postgres_url: str, embedder: ServingEmbedder, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[AsyncTestClient[Litestar]]:
    data_dir = tmp_path_factory.mktemp("event_time_precision")
    async with (
        build_engines(database_url=api_postgres_url, lexical_path=data_dir / "lexical", embedder=embedder) as built,
        app_client(built.app(api_settings(data_dir))) as test_client,
    ):
        yield test_client


@pytest.mark.parametrize(
    ("sent", "stored"),
    [
        pytest.param("2024-12-31T23:59:59.9999999Z", "2024-12-31T23:59:59.999999Z", id="stays-in-its-year"),
        pytest.param("2024-01-01T00:00:00.123456789+02:00", "2023-12-31T22:00:00.123456Z", id="nanoseconds-offset"),
        pytest.param("2024-01-01T00:00:00.1234565Z", "2024-01-01T00:00:00.123456Z", id="no-half-up"),
        pytest.param("2024-01-01T00:00:00.5Z", "2024-01-01T00:00:00.500000Z", id="fewer-digits"),
    ],
)
async def test_event_time_digits_past_the_microsecond_are_dropped_not_rounded(
    client: AsyncTestClient[Litestar], unique_name: str, sent: str, stored: str
) -> None:
    documents = f"/v1/projects/{unique_name}/documents"

    written = await client.post(documents, json={"id": "a", "text": "Alpha.", "event_time": sent})
    read = await client.get(f"{documents}/a")

    assert written.status_code == 201, written.text
    assert read.json()["event_time"] == stored


async def test_a_time_with_escaped_characters_is_truncated_alike(
    client: AsyncTestClient[Litestar], unique_name: str
) -> None:
    documents = f"/v1/projects/{unique_name}/documents"
    body = '{"id": "a", "text": "Alpha.", "event_time": "2024-12-31T23:59:59\\u002e99999\\u00399Z"}'

    written = await client.post(documents, content=body, headers={"content-type": "application/json"})
    read = await client.get(f"{documents}/a")

    assert written.status_code == 201, written.text
    assert read.json()["event_time"] == "2024-12-31T23:59:59.999999Z"


async def test_each_document_of_a_batch_keeps_its_own_truncated_event_time(
    client: AsyncTestClient[Litestar], unique_name: str
) -> None:
    documents = f"/v1/projects/{unique_name}/documents"
    batch = {
        "documents": [
            {"id": "a", "text": "Alpha.", "event_time": "2024-06-01T00:00:00Z"},
            {"id": "b", "text": "Beta.", "context": "at .1234567 s", "metadata": {"ratio": 0.12345678}},
            {"id": "c", "text": "Gamma.", "event_time": "2024-06-30T23:59:59.999999999Z"},
        ]
    }

    written = await client.post(documents, json=batch)
    read = [(await client.get(f"{documents}/{name}")).json()["event_time"] for name in "abc"]

    assert written.status_code == 201, written.text
    assert read == ["2024-06-01T00:00:00Z", None, "2024-06-30T23:59:59.999999Z"]


async def test_an_event_time_msgspec_rounds_past_year_9999_is_truncated_into_it(
    client: AsyncTestClient[Litestar], unique_name: str
) -> None:
    documents = f"/v1/projects/{unique_name}/documents"

    written = await client.post(
        documents, json={"id": "a", "text": "Alpha.", "event_time": "9999-12-31T23:59:59.9999999+01:00"}
    )
    read = await client.get(f"{documents}/a")

    assert written.status_code == 201, written.text
    assert read.json()["event_time"] == "9999-12-31T22:59:59.999999Z"


async def test_the_last_instant_of_year_9999_is_refused_as_out_of_range_not_as_no_date_time(
    client: AsyncTestClient[Litestar], unique_name: str
) -> None:
    written = await client.post(
        f"/v1/projects/{unique_name}/documents", json={"id": "a", "text": "Alpha.", "event_time": LAST_INSTANT_SENT}
    )

    assert written.status_code == 400
    assert written.json()["field"] == "event_time"
    assert "before 9999-12-31T23:59:59.999999Z" in written.json()["detail"]


# The times a search or a listing takes are truncated alike, so a bound and a note written at one instant stay
# equal: rounded, the bound moved to 2025's first midnight, and a range ending at that instant (its end excluded)
# held the note, while one starting there (its start included) lost it.
END_OF_2024 = "2024-12-31T23:59:59.9999999Z"
LAST_INSTANT_SENT = "9999-12-31T23:59:59.9999999Z"
NOTES = [
    {"id": "evening", "text": "Fireworks over the harbour.", "event_time": "2024-12-31T20:00:00Z"},
    {"id": "last-instant", "text": "Fireworks over the harbour.", "event_time": END_OF_2024},
    {"id": "midnight", "text": "Fireworks over the harbour.", "event_time": "2025-01-01T00:00:00Z"},
]
BEFORE_LAST_INSTANT = ["evening"]
FROM_LAST_INSTANT = ["last-instant", "midnight"]


async def notes(client: AsyncTestClient[Litestar], project: str) -> None:
    written = await client.post(f"/v1/projects/{project}/documents", json={"documents": NOTES})
    assert written.status_code == 201, written.text


def found(answer: dict[str, object]) -> list[str]:
    results = answer["results"]
    assert isinstance(results, list)
    return sorted({hit["document_id"] for hit in results})


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        pytest.param({"date_to": END_OF_2024}, BEFORE_LAST_INSTANT, id="date_to-excludes-its-instant"),
        pytest.param({"date_from": END_OF_2024}, FROM_LAST_INSTANT, id="date_from-includes-its-instant"),
    ],
)
async def test_a_search_date_filter_past_the_microsecond_is_truncated_not_rounded(
    client: AsyncTestClient[Litestar], unique_name: str, filters: dict[str, str], expected: list[str]
) -> None:
    await notes(client, unique_name)
    body = {"project": unique_name, "query": "fireworks", "strategy": "semantic", "filters": filters}

    single = await client.post("/v1/search", json=body)
    fields = {name: value for name, value in body.items() if name != "project"}
    batch = await client.post("/v1/search/batch", json={"project": unique_name, "queries": [{"query": "x"}, fields]})

    assert single.status_code == 200, single.text
    assert found(single.json()) == expected
    assert batch.status_code == 200, batch.text
    assert [found(answer) for answer in batch.json()["results"]][1] == expected


async def test_a_search_date_filter_with_escaped_digits_is_truncated_alike(
    client: AsyncTestClient[Litestar], unique_name: str
) -> None:
    await notes(client, unique_name)
    body = (
        f'{{"project": "{unique_name}", "query": "fireworks", "strategy": "semantic",'
        ' "filters": {"date_to": "2024-12-31T23:59:59\\u002e99999\\u00399Z"}}'
    )

    response = await client.post("/v1/search", content=body, headers={"content-type": "application/json"})

    assert response.status_code == 200, response.text
    assert found(response.json()) == BEFORE_LAST_INSTANT


# Sunday 11 June 2023, its last instant as written: "last week" is the week of 29 May. Rounded to Monday 12 June,
# it was the week of 5 June.
SUNDAY_END = "2023-06-11T23:59:59.9999999Z"
WEEK_OF_29_MAY = ["2023-05-29T00:00:00Z", "2023-06-05T00:00:00Z"]


def last_week_of(answer: dict[str, object]) -> list[object]:
    analysis = answer["query_analysis"]
    assert isinstance(analysis, dict)
    return [analysis["event_time_from"], analysis["event_time_to"]]


async def test_as_of_past_the_microsecond_stays_in_its_day_on_every_search_endpoint(
    client: AsyncTestClient[Litestar], unique_name: str
) -> None:
    query = {"query": "what happened last week", "explain": True, "as_of": SUNDAY_END}

    got = await client.get("/memory/query", params={**query, "project": unique_name, "explain": "true"})
    posted = await client.post("/v1/search", json={**query, "project": unique_name})
    batch = await client.post("/v1/search/batch", json={"project": unique_name, "queries": [query]})

    assert [response.status_code for response in (got, posted, batch)] == [200, 200, 200], (got.text, batch.text)
    assert last_week_of(got.json()) == WEEK_OF_29_MAY
    assert last_week_of(posted.json()) == WEEK_OF_29_MAY
    assert last_week_of(batch.json()["results"][0]) == WEEK_OF_29_MAY


async def test_a_get_as_of_past_year_9999_once_rounded_is_truncated_into_it(
    client: AsyncTestClient[Litestar], unique_name: str
) -> None:
    response = await client.get(
        "/memory/query", params={"query": "fireworks", "project": unique_name, "as_of": LAST_INSTANT_SENT}
    )

    assert response.status_code == 200, response.text


async def test_a_listing_range_past_the_microsecond_is_truncated_not_rounded(
    client: AsyncTestClient[Litestar], unique_name: str
) -> None:
    await notes(client, unique_name)
    documents = f"/v1/projects/{unique_name}/documents"

    until = await client.get(documents, params={"event_time_to": END_OF_2024})
    since = await client.get(documents, params={"event_time_from": END_OF_2024})
    deleted = await client.delete(documents, params={"event_time_to": END_OF_2024})
    left = await client.get(documents)

    assert [item["id"] for item in until.json()["items"]] == BEFORE_LAST_INSTANT, until.text
    assert [item["id"] for item in since.json()["items"]] == FROM_LAST_INSTANT
    assert deleted.json()["deleted"] == len(BEFORE_LAST_INSTANT), deleted.text
    assert [item["id"] for item in left.json()["items"]] == FROM_LAST_INSTANT


async def test_a_listing_time_that_is_a_number_with_many_digits_is_no_server_error(
    client: AsyncTestClient[Litestar], unique_name: str
) -> None:
    # The framework reads a number in a query string as seconds since 1970; re-reading its text as an
    # RFC 3339 time (it has digits past a sixth decimal) raised: a 500 the reliability fuzz check found.
    documents = f"/v1/projects/{unique_name}/documents"

    listed = await client.get(documents, params={"event_time_from": "-4.021529829321902e-182"})
    deleted = await client.delete(documents, params={"tag": "null", "event_time_from": "-4.021529829321902e-182"})

    assert listed.status_code < 500, listed.text
    assert deleted.status_code < 500, deleted.text
