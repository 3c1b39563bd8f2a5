"""A refusal names what the request sent, as the request spells it, and says what was received.

Callers know the public API only (an LLM agent reads the 400): `field` and the words name `weights.semantic`,
`filters.date_from`, `queries[2].query`, never the service's own names (`semantic_weight`); the same
mistake through another door (a batch item, the GET query string) is worded alike.
"""

from __future__ import annotations

from typing import Any

import pytest

PROJECT = "error-names"


def problem_of(response: Any) -> dict[str, Any]:
    assert response.status_code == 400, response.text
    return response.json()


async def test_weights_both_0_are_named_as_the_body_sends_them(api_client) -> None:
    weights = {"semantic": 0, "lexical": 0}

    single = problem_of(
        await api_client.post("/v1/search", json={"project": PROJECT, "query": "x", "weights": weights})
    )
    batch = problem_of(
        await api_client.post(
            "/v1/search/batch",
            json={"project": PROJECT, "queries": [{"query": "ok"}, {"query": "x", "weights": weights}]},
        )
    )

    assert single["field"] == "weights.semantic"
    assert single["detail"].startswith("weights.semantic and weights.lexical must not both be 0")
    assert batch["field"] == "queries[1].weights.semantic"
    assert batch["detail"] == f"queries[1]: {single['detail']}"
    assert "_weight" not in single["detail"]


async def test_a_weight_alone_above_1_names_both_legs_and_the_value(api_client) -> None:
    problem = problem_of(
        await api_client.post("/v1/search", json={"project": PROJECT, "query": "x", "weights": {"lexical": 2}})
    )

    assert problem["field"] == "weights.lexical"
    assert "weights.lexical given alone must be at most 1 (weights.semantic gets 1 - it); got 2" in problem["detail"]


@pytest.mark.parametrize(
    ("filters", "field", "words"),
    [
        (
            {"date_from": "2024-02-01T00:00:00Z", "date_to": "2024-01-01T00:00:00Z"},
            "filters.date_from",
            "filters.date_from must be before filters.date_to; got 2024-02-01T00:00:00+00:00",
        ),
        ({"tags": ["ok", "  "]}, "filters.tags[1]", "filters.tags[1] is blank"),
        ({"source_prefix": "a\u0000"}, "filters.source_prefix", "filters.source_prefix must not contain a NUL"),
        ({"level": "L9"}, "filters.level", "filters.level: must be a level, L0 to L6; got 'L9'"),
    ],
)
async def test_a_refused_filter_is_named_by_its_path_in_the_body(api_client, filters, field: str, words: str) -> None:
    problem = problem_of(
        await api_client.post("/v1/search", json={"project": PROJECT, "query": "x", "filters": filters})
    )

    assert problem["field"] == field
    assert words in problem["detail"]


async def test_a_batch_query_the_service_refuses_is_named_in_the_words_too(api_client) -> None:
    problem = problem_of(
        await api_client.post(
            "/v1/search/batch", json={"project": PROJECT, "queries": [{"query": "ok"}, {"query": "   "}]}
        )
    )

    assert problem["field"] == "queries[1].query"
    assert problem["detail"] == "queries[1]: query must not be empty"


async def test_as_of_without_an_offset_is_worded_alike_in_a_body_and_a_query_string(api_client) -> None:
    sent = "2024-05-08T12:00:00"

    body = problem_of(await api_client.post("/v1/search", json={"project": PROJECT, "query": "x", "as_of": sent}))
    query = problem_of(await api_client.get("/memory/query", params={"project": PROJECT, "query": "x", "as_of": sent}))

    assert body["field"] == query["field"] == "as_of"
    assert body["detail"] == query["detail"]
    assert body["detail"].startswith("as_of: expected a date-time with an offset or Z")
    assert body["detail"].endswith(f"got {sent!r}")
    assert "`datetime`" not in body["detail"]


async def test_a_value_past_a_bound_is_shown_in_a_body_and_a_query_string(api_client) -> None:
    body = problem_of(await api_client.post("/v1/search", json={"project": PROJECT, "query": "x", "limit": 0}))
    query = problem_of(await api_client.get("/memory/query", params={"project": PROJECT, "query": "x", "limit": "0"}))
    long_id = problem_of(
        await api_client.post(f"/v1/projects/{PROJECT}/documents", json={"id": "a" * 300, "text": "x"})
    )

    assert body["detail"] == "limit: must be at least 1; got 0"
    assert query["detail"] == "limit: must be at least 1; got '0'"
    assert long_id["field"] == "id"
    assert long_id["detail"].startswith("id: must be at most 256 characters long; got 'aaaa")
    assert long_id["detail"].endswith("... (300 characters)")


async def test_an_unknown_field_names_the_fields_its_object_takes(api_client) -> None:
    weights = problem_of(
        await api_client.post("/v1/search", json={"project": PROJECT, "query": "x", "weights": {"vector": 1}})
    )
    document = problem_of(
        await api_client.post(
            f"/v1/projects/{PROJECT}/documents",
            json={"documents": [{"id": "a", "text": "x"}, {"id": "b", "text": "x", "colour": "red"}]},
        )
    )

    assert weights["field"] == "weights.vector"
    assert weights["detail"] == "weights: unknown field `vector`; it takes lexical, semantic"
    assert document["field"] == "documents[1].colour"
    assert document["detail"].startswith("documents[1]: unknown field `colour`; it takes context, event_time,")


async def test_an_empty_ingest_body_is_worded_as_an_empty_search_body(api_client) -> None:
    headers = {"Content-Type": "application/json"}

    search = problem_of(await api_client.post("/v1/search", content=b"", headers=headers))
    ingest = problem_of(await api_client.post(f"/v1/projects/{PROJECT}/documents", content=b"", headers=headers))

    assert search["field"] == ingest["field"] == "body"
    assert ingest["detail"] == search["detail"] == "the request body is empty: expected a JSON object"
