"""Regressions for what schema-driven fuzzing (schemathesis, `scripts/fuzz_api.py`) found, one test each.

Each was a contract failure or a server error on input the API document allows or should refuse.
"""

from __future__ import annotations

import pytest

PROJECT = "fuzz-findings"


@pytest.fixture(scope="module")
async def client(api_client):
    response = await api_client.post(
        f"/v1/projects/{PROJECT}/documents",
        json={
            "id": "edge",
            "text": "Calendar edges: the backup ran at the dawn of time.",
            "event_time": "2024-05-01T00:00:00Z",
        },
    )
    assert response.status_code == 201
    return api_client


async def test_a_number_where_the_schema_says_boolean_is_a_400(client) -> None:
    response = await client.post("/v1/search", json={"project": PROJECT, "query": "backup", "explain": 0})

    assert response.status_code == 400
    assert response.headers["content-type"].startswith("application/problem+json")
    assert response.json()["field"] == "explain"


async def test_a_numeric_string_where_the_schema_says_integer_is_a_400(client) -> None:
    response = await client.post("/v1/search", json={"project": PROJECT, "query": "backup", "limit": "5"})

    assert response.status_code == 400
    assert response.json()["field"] == "limit"


async def test_a_lax_value_inside_a_batch_query_names_its_place(client) -> None:
    response = await client.post(
        "/v1/search/batch", json={"project": PROJECT, "queries": [{"query": "backup"}, {"query": "x", "explain": 1}]}
    )

    assert response.status_code == 400
    assert response.json()["field"] == "queries[1].explain"


async def test_if_match_with_a_non_ascii_digit_is_a_400_not_a_500(client) -> None:
    response = await client.delete(
        f"/v1/projects/{PROJECT}/documents/edge", headers={"If-Match": "\N{SUPERSCRIPT TWO}".encode("latin-1")}
    )

    assert response.status_code == 400
    assert response.json()["field"] == "If-Match"


async def test_if_match_longer_than_any_version_is_a_400(client) -> None:
    response = await client.delete(f"/v1/projects/{PROJECT}/documents/edge", headers={"If-Match": "9" * 5000})

    assert response.status_code == 400
    assert response.json()["field"] == "If-Match"


async def test_a_listing_filter_offset_before_year_one_in_utc_answers(client) -> None:
    response = await client.get(
        f"/v1/projects/{PROJECT}/documents", params={"event_time_from": "0001-01-01T00:00:00+14:00"}
    )

    assert response.status_code == 200
    assert [item["id"] for item in response.json()["items"]] == ["edge"]


async def test_a_search_date_filter_past_year_9999_in_utc_answers(client) -> None:
    response = await client.post(
        "/v1/search",
        json={"project": PROJECT, "query": "backup", "filters": {"date_to": "9999-12-31T23:59:59-14:00"}},
    )

    assert response.status_code == 200


async def test_an_event_time_offset_before_year_one_in_utc_is_a_400_naming_it(client) -> None:
    # Once a 500 (past `datetime`'s range), then stored as -infinity; now refused like any bad event time.
    response = await client.post(
        f"/v1/projects/{PROJECT}/documents",
        json={"id": "dawn", "text": "The first backup.", "event_time": "0001-01-01T00:30:00+01:00"},
    )

    assert response.status_code == 400
    assert response.json()["field"] == "event_time"


async def test_a_method_the_path_does_not_serve_answers_405_with_allow(client) -> None:
    response = await client.request("TRACE", "/v1/search")

    assert response.status_code == 405
    assert "POST" in response.headers["allow"].split(", ")
    assert response.headers["content-type"].startswith("application/problem+json")


@pytest.mark.parametrize("parameter", ["source_prefix", "tag"])
async def test_a_nul_character_in_a_listing_filter_is_a_400_not_an_engine_failure(client, parameter: str) -> None:
    response = await client.get(f"/v1/projects/{PROJECT}/documents", params={parameter: "runbooks/\x00"})

    assert response.status_code == 400
    assert response.json()["field"] == parameter
    assert response.json()["detail"] == f"{parameter}: must not contain a NUL character; got 'runbooks/\\x00'"


@pytest.mark.parametrize("method", ["GET", "DELETE"])
async def test_a_nul_character_in_a_document_id_is_a_400_not_an_engine_failure(client, method: str) -> None:
    # It reached PostgreSQL, which refused the byte: a 503 "engine unavailable" quoting the driver's error.
    response = await client.request(method, f"/v1/projects/{PROJECT}/documents/runbooks%00x.md")

    assert response.status_code == 400, response.text
    assert response.json()["field"] == "document_id"
    assert "NUL" in response.json()["detail"]


async def test_a_nul_character_in_a_delete_filter_is_a_400_not_an_engine_failure(client) -> None:
    response = await client.delete(f"/v1/projects/{PROJECT}/documents", params={"source_prefix": "\x00"})

    assert response.status_code == 400
    assert response.json()["field"] == "source_prefix"


async def test_a_nul_character_in_a_search_filter_answers(client) -> None:
    response = await client.post(
        "/v1/search",
        json={"project": PROJECT, "query": "backup", "filters": {"source_prefix": "\x00", "tags": ["a\x00"]}},
    )

    assert response.status_code in {200, 400}


async def test_a_nul_character_in_a_document_is_a_400_not_an_engine_failure(client) -> None:
    response = await client.post(
        f"/v1/projects/{PROJECT}/documents", json={"id": "nul", "text": "before\x00after", "title": "t\x00"}
    )

    assert response.status_code == 400


async def test_a_get_query_longer_than_a_url_carries_is_a_400_naming_post(client) -> None:
    # Found by the bounded fuzz run: a 100,001-character `query` in the URL met the HTTP server's request-line
    # limit, which answers a bare text/plain 400. The GET documents and enforces what a URL can carry.
    at_limit = await client.get("/memory/query", params={"query": "backup " * 571 + "ab", "project": PROJECT})
    past_limit = await client.get("/memory/query", params={"query": "b" * 4001, "project": PROJECT})

    assert at_limit.status_code == 200
    assert past_limit.status_code == 400
    assert past_limit.headers["content-type"].startswith("application/problem+json")
    assert "POST /v1/search" in past_limit.json()["detail"]
