"""`Accept` on the API: a route asked only for types it cannot produce answers 406; JSON, wildcards and none answer."""

from __future__ import annotations

import pytest

from tests.api.conftest import with_backup_note

PROJECT = "content-negotiation"
SEARCH = {"project": PROJECT, "query": "backups"}


@pytest.fixture(scope="module")
async def client(api_client):
    return await with_backup_note(api_client, PROJECT)


@pytest.mark.parametrize(
    "accept",
    [
        "text/html",
        "application/xml",
        "text/*",
        "application/xml, text/html;q=0.9",
        "application/json;q=0, application/problem+json;q=0, */*",
        "application/json;q=0, application/problem+json;q=0",
        "application/vnd.poimen+json",
        "json",
        "application/json;q=2",
    ],
)
async def test_an_accept_admitting_no_json_is_a_406_with_a_problem_body(client, accept) -> None:
    # It was a 200 with JSON, which a client that asked for XML could not parse.
    response = await client.get("/memory/query", params=SEARCH, headers={"accept": accept})

    assert response.status_code == 406
    assert response.headers["content-type"].startswith("application/problem+json")
    body = response.json()
    assert (body["status"], body["title"]) == (406, "Not acceptable")
    assert "application/json" in body["detail"]


async def test_every_kind_of_api_route_negotiates(client) -> None:
    headers = {"accept": "text/html"}

    answers = [
        await client.post("/v1/search", json=SEARCH, headers=headers),
        await client.get(f"/v1/projects/{PROJECT}/documents/backup", headers=headers),
        await client.head(f"/v1/projects/{PROJECT}/documents/backup", headers=headers),
        await client.get(f"/v1/projects/{PROJECT}/documents", headers=headers),
        await client.get(f"/v1/projects/{PROJECT}", headers=headers),
        await client.get("/healthz", headers=headers),
    ]

    assert [answer.status_code for answer in answers] == [406] * len(answers)


async def test_a_refused_write_writes_nothing(client) -> None:
    written = await client.post(
        f"/v1/projects/{PROJECT}/documents", json={"id": "refused", "text": "Never stored."}, headers={"accept": "a/b"}
    )

    assert written.status_code == 406
    assert (await client.get(f"/v1/projects/{PROJECT}/documents/refused")).status_code == 404


@pytest.mark.parametrize(
    "accept",
    [
        "*/*",
        "application/*",
        "application/json",
        "Application/JSON",
        "application/json; charset=utf-8",
        "application/json;q=0.1, text/html",
        "text/html, application/json;q=0.5",
        "application/problem+json",
        "application/json, application/problem+json",
        "text/html, */*;q=0.01",
        "",
        "text/html, , application/json",
    ],
)
async def test_an_accept_admitting_json_is_answered(client, accept) -> None:
    response = await client.get("/memory/query", params=SEARCH, headers={"accept": accept})

    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"


async def test_no_accept_header_is_answered(client) -> None:
    request = client.build_request("GET", "/memory/query", params=SEARCH)
    del request.headers["accept"]  # the test client sends `*/*` unless told

    response = await client.send(request)

    assert response.status_code == 200


async def test_pages_scrapes_and_options_disregard_accept(client) -> None:
    headers = {"accept": "application/xml"}

    metrics = await client.get("/metrics", headers=headers)
    console = await client.get("/console", headers=headers)
    schema = await client.get("/schema/openapi.json", headers=headers)
    options = await client.options("/v1/search", headers=headers)

    assert metrics.headers["content-type"].startswith("text/plain")
    assert [metrics.status_code, console.status_code, schema.status_code, options.status_code] == [200, 200, 200, 204]
