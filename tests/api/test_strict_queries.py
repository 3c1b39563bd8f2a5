"""An API route refuses a query parameter it does not declare (400 naming it) instead of ignoring it."""

from __future__ import annotations

import pytest

from tests.api.conftest import with_backup_note

PROJECT = "strict-queries"


@pytest.fixture(scope="module")
async def client(api_client):
    return await with_backup_note(api_client, PROJECT)


@pytest.mark.parametrize(
    ("path", "params", "unknown"),
    [
        ("/memory/query", {"query": "backup", "project": PROJECT, "min_score": "0.5"}, "min_score"),
        ("/memory/query", {"query": "backup", "project": PROJECT, "date_from": "2024-01-01"}, "date_from"),
        (f"/v1/projects/{PROJECT}/documents", {"limit": "5", "tags": "ops"}, "tags"),
        (f"/v1/projects/{PROJECT}", {"verbose": "1"}, "verbose"),
    ],
)
async def test_an_undeclared_query_parameter_is_a_400_naming_it(client, path, params, unknown) -> None:
    response = await client.get(path, params=params)

    assert response.status_code == 400
    assert response.headers["content-type"].startswith("application/problem+json")
    body = response.json()
    assert body["field"] == unknown
    assert f"unknown query parameter '{unknown}'" in body["detail"]


async def test_the_message_says_what_the_route_takes(client) -> None:
    response = await client.get("/memory/query", params={"query": "backup", "project": PROJECT, "tag": "ops"})

    assert "takes as_of, cursor, explain, fusion, limit, offset, project, query, strategy" in response.json()["detail"]


async def test_declared_parameters_still_answer(client) -> None:
    searched = await client.get("/memory/query", params={"query": "backup", "project": PROJECT, "limit": "3"})
    listed = await client.get(f"/v1/projects/{PROJECT}/documents", params={"limit": "5", "tag": "ops"})

    assert searched.status_code == 200
    assert searched.json()["results"][0]["document_id"] == "backup"
    assert listed.status_code == 200


async def test_a_post_route_with_a_query_string_it_does_not_take_is_a_400(client) -> None:
    response = await client.post("/v1/search", params={"debug": "1"}, json={"project": PROJECT, "query": "backup"})

    assert response.status_code == 400
    assert response.json()["field"] == "debug"


async def test_routes_outside_the_api_ignore_a_query_string(client) -> None:
    assert (await client.get("/healthz", params={"from": "probe"})).status_code == 200


async def test_every_api_operation_documents_the_400_an_unknown_parameter_gets(client) -> None:
    document = (await client.get("/schema/openapi.json")).json()

    undocumented = [
        f"{method.upper()} {path}"
        for path, item in document["paths"].items()
        if path.startswith(("/memory/", "/v1/", "/admin/"))
        for method, operation in item.items()
        if method in {"get", "post", "put", "patch", "delete"} and "400" not in operation["responses"]
    ]
    assert undocumented == []


async def test_a_parameter_sent_twice_that_takes_one_value_is_a_400(client) -> None:
    response = await client.get(f"/v1/projects/{PROJECT}/documents", params=[("tag", "ops"), ("tag", "db")])

    assert response.status_code == 400
    assert response.json()["field"] == "tag"
    assert "sent 2 times" in response.json()["detail"]


@pytest.mark.parametrize(
    ("path", "params", "named"),
    [
        ("/memory/query", {"query": "backup", "project": PROJECT, "limit": "5.0"}, "limit"),
        ("/memory/query", {"query": "backup", "project": PROJECT, "limit": "1e1"}, "limit"),
        ("/memory/query", {"query": "backup", "project": PROJECT, "offset": "1.0"}, "offset"),
        (f"/v1/projects/{PROJECT}/documents", {"limit": "2.0"}, "limit"),
        ("/v1/projects", {"limit": "1e1"}, "limit"),
    ],
)
async def test_a_whole_number_not_written_in_digits_is_a_400_as_in_a_body(client, path, params, named) -> None:
    # Litestar read `limit=5.0` as 5 and `1e1` as 10, where a search body's `"limit": 5.0` is a 400.
    response = await client.get(path, params=params)
    posted = await client.post("/v1/search", json={"query": "backup", "project": PROJECT, named: 5.0})

    assert response.status_code == 400, response.text
    assert response.json()["field"] == named
    assert f"{named} must be a whole number written in digits" in response.json()["detail"]
    assert (posted.status_code, posted.json()["field"]) == (400, named)


async def test_whole_numbers_in_digits_still_answer_and_bounds_still_apply(client) -> None:
    negative = await client.get("/memory/query", params={"query": "backup", "project": PROJECT, "offset": "-1"})
    paged = await client.get(
        "/memory/query", params={"query": "backup", "project": PROJECT, "limit": "1", "offset": "0"}
    )

    assert negative.status_code == 400
    assert negative.json()["field"] == "offset"
    assert "at least 0" in negative.json()["detail"]
    assert paged.status_code == 200
    assert [hit["rank"] for hit in paged.json()["results"]] == [1]


TIMED_PROJECT = "strict-query-times"
DOCUMENTS = f"/v1/projects/{TIMED_PROJECT}/documents"


@pytest.fixture(scope="module")
async def timed(client):
    response = await client.post(
        DOCUMENTS, json={"id": "dated", "text": "Restore drill notes.", "event_time": "2024-05-01T00:00:00Z"}
    )
    assert response.status_code == 201
    return client


@pytest.mark.parametrize("name", ["event_time_from", "event_time_to", "updated_since"])
@pytest.mark.parametrize("number", ["5", "1714521600", "1e9", "-4.5"])
async def test_a_time_parameter_given_as_a_number_is_a_400_naming_it(timed, name, number) -> None:
    # The framework read a number as seconds since 1970: `?event_time_from=5` was 1970-01-01T00:00:05Z, and a
    # delete by that filter deleted every dated document.
    listed = await timed.get(DOCUMENTS, params={name: number})
    deleted = await timed.delete(DOCUMENTS, params={name: number})

    for response in (listed, deleted):
        assert response.status_code == 400, response.text
        assert response.json()["field"] == name
        assert "RFC 3339" in response.json()["detail"]
        assert f"got {number!r}" in response.json()["detail"]
    assert (await timed.get(f"{DOCUMENTS}/dated")).status_code == 200


@pytest.mark.parametrize(
    "time",
    ["2024-05-01T00:00:00Z", "2024-05-01T00:00:00", "2024-05-01T02:00:00+02:00", "2024-04-30T23:59:59.9999999Z"],
)
async def test_rfc3339_time_parameters_still_answer(timed, time) -> None:
    response = await timed.get(DOCUMENTS, params={"event_time_from": time})

    assert response.status_code == 200
    assert [item["id"] for item in response.json()["items"]] == ["dated"]


async def test_an_offset_whose_plus_arrived_as_a_space_is_told_how_to_send_it(timed) -> None:
    response = await timed.get(f"{DOCUMENTS}?event_time_from=2024-05-01T02:00:00+02:00")

    assert response.status_code == 400
    assert response.json()["field"] == "event_time_from"
    assert "%2B" in response.json()["detail"]


async def test_a_number_as_of_is_a_400_naming_it(timed) -> None:
    response = await timed.get("/memory/query", params={"query": "restore", "project": TIMED_PROJECT, "as_of": "5"})

    assert response.status_code == 400
    assert response.json()["field"] == "as_of"
