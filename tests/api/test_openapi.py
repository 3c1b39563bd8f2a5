"""The OpenAPI document at /schema describes both search endpoints, their inputs, the reference Part 4
response shape and the problem+json errors. Built from the app itself: no engine is needed to read it.
"""

from __future__ import annotations

from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from app.api.app import create_app
from tests.api.conftest import api_settings

PART4_RESPONSE_FIELDS = {"query", "project", "search_strategy", "strategy_confidence", "results", "metrics"}
PART4_HIT_FIELDS = {
    "id", "rank", "final_score", "semantic_score", "lexical_score", "fusion_method", "retrieval_engine",
    "text", "source", "level", "breadcrumb", "score_breakdown",
}  # fmt: skip
PART4_METRICS_FIELDS = {
    "total_time_ms", "semantic_time_ms", "lexical_time_ms", "fusion_time_ms",
    "semantic_results_count", "lexical_results_count", "final_results_count",
}  # fmt: skip


@pytest.fixture(scope="module")
async def openapi(tmp_path_factory) -> dict[str, Any]:
    """The served OpenAPI document. The schema routes never touch the engines, so none are started."""
    app = create_app(api_settings(tmp_path_factory.mktemp("openapi")))
    # No lifespan: `AsyncTestClient` without `async with` serves routes without starting engines.
    client = AsyncTestClient(app=app, base_url="http://127.0.0.1")
    response = await client.get("/schema/openapi.json")
    assert response.status_code == 200
    return response.json()


def component(openapi: dict[str, Any], reference: dict[str, Any]) -> dict[str, Any]:
    name = reference["$ref"].removeprefix("#/components/schemas/")
    schema: dict[str, Any] = openapi["components"]["schemas"][name]
    return schema


def test_both_search_endpoints_are_described(openapi) -> None:
    assert "get" in openapi["paths"]["/memory/query"]
    assert "post" in openapi["paths"]["/v1/search"]


def test_get_query_parameters(openapi) -> None:
    parameters = {item["name"]: item for item in openapi["paths"]["/memory/query"]["get"]["parameters"]}

    assert {"query", "project", "limit", "strategy", "fusion", "explain"} <= set(parameters)
    assert all(parameters[name]["in"] == "query" for name in parameters)
    limit = parameters["limit"]["schema"]
    assert (limit["minimum"], limit["maximum"]) == (1, 100)


def test_post_body_is_the_search_request(openapi) -> None:
    body = openapi["paths"]["/v1/search"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    request = component(openapi, body)

    assert set(request["required"]) == {"query", "project"}
    assert {
        "query", "project", "limit", "filters", "strategy", "fusion", "weights", "rrf_k", "collapse", "min_score",
        "explain",
    } <= set(request["properties"])  # fmt: skip
    assert request["properties"]["query"]["maxLength"] == 2000
    assert {"hybrid", "semantic", "lexical", "cascading"} <= set(request["properties"]["strategy"]["enum"])
    assert {"rrf", "weighted", "zscore"} <= set(request["properties"]["fusion"]["enum"])
    filters_reference = next(option for option in request["properties"]["filters"]["oneOf"] if "$ref" in option)
    filters = component(openapi, filters_reference)
    assert set(filters["properties"]) == {"level", "tags", "source_prefix", "date_from", "date_to"}


@pytest.mark.parametrize(("path", "method"), [("/memory/query", "get"), ("/v1/search", "post")])
def test_success_is_the_reference_response_shape(openapi, path: str, method: str) -> None:
    success = openapi["paths"][path][method]["responses"]["200"]["content"]["application/json"]["schema"]
    response = component(openapi, success)
    hit = component(openapi, response["properties"]["results"]["items"])
    metrics = component(openapi, response["properties"]["metrics"])
    breakdown = component(openapi, hit["properties"]["score_breakdown"])

    assert set(response["required"]) >= PART4_RESPONSE_FIELDS
    assert set(hit["required"]) >= PART4_HIT_FIELDS
    assert set(metrics["required"]) >= PART4_METRICS_FIELDS
    assert {"semantic_rank", "lexical_rank", "rrf_components"} <= set(breakdown["required"])


@pytest.mark.parametrize(("path", "method"), [("/memory/query", "get"), ("/v1/search", "post")])
@pytest.mark.parametrize("status", ["400", "503"])
def test_errors_are_documented_as_problem_json(openapi, path: str, method: str, status: str) -> None:
    content = openapi["paths"][path][method]["responses"][status]["content"]

    problem = component(openapi, content["application/problem+json"]["schema"])
    assert {"type", "title", "status", "detail"} <= set(problem["required"])
    assert {"field", "reasons"} <= set(problem["properties"])


@pytest.mark.parametrize(
    ("path", "method"),
    [
        ("/v1/projects/{project}", "get"),
        ("/v1/projects/{project}", "delete"),
        ("/v1/projects/{project}/documents", "get"),
        ("/v1/projects/{project}/documents", "delete"),
        ("/v1/search/batch", "post"),
    ],
)
def test_memory_management_endpoints_are_described(openapi, path: str, method: str) -> None:
    operation = openapi["paths"][path][method]

    assert operation["summary"]
    assert "application/json" in operation["responses"]["200"]["content"]


def test_listing_parameters_and_search_paging_are_described(openapi) -> None:
    listing = {p["name"] for p in openapi["paths"]["/v1/projects/{project}/documents"]["get"]["parameters"]}
    query = {p["name"] for p in openapi["paths"]["/memory/query"]["get"]["parameters"]}
    request = component(
        openapi, openapi["paths"]["/v1/search"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    )

    assert {"limit", "cursor", "source_prefix", "tag", "event_time_from", "event_time_to", "updated_since"} <= listing
    assert {"offset", "cursor"} <= query
    assert {"offset", "cursor"} <= set(request["properties"])
