"""The OpenAPI document at /schema describes both search endpoints, their inputs, the reference Part 4
response shape and the problem+json errors. Built from the app itself: no engine is needed to read it.
"""

from __future__ import annotations

from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from app.api.app import create_app
from app.domain.project_ids import PROJECT_ID_PATTERN
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

    assert {"query", "project", "limit", "strategy", "fusion", "explain", "as_of"} <= set(parameters)
    assert all(parameters[name]["in"] == "query" for name in parameters)
    limit = parameters["limit"]["schema"]
    assert (limit["minimum"], limit["maximum"]) == (1, 100)
    assert parameters["as_of"]["schema"]["format"] == "date-time"


def test_post_body_is_the_search_request(openapi) -> None:
    body = openapi["paths"]["/v1/search"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    request = component(openapi, body)

    assert set(request["required"]) == {"query", "project"}
    assert {
        "query", "project", "limit", "filters", "strategy", "fusion", "weights", "rrf_k", "collapse", "min_score",
        "explain",
    } <= set(request["properties"])  # fmt: skip
    assert request["properties"]["query"]["maxLength"] == 100_000  # the ceiling; QUERY_MAX_CHARS is checked after
    assert "QUERY_MAX_CHARS" in request["properties"]["query"]["description"]
    assert {"hybrid", "semantic", "lexical", "cascading"} <= set(given(request, "strategy")["enum"])
    assert {"rrf", "weighted", "zscore"} <= set(given(request, "fusion")["enum"])
    assert request["additionalProperties"] is False
    filters = component(openapi, given(request, "filters"))
    assert set(filters["properties"]) == {"level", "tags", "source_prefix", "date_from", "date_to"}


def test_every_bound_the_search_body_checks_is_in_the_document(openapi) -> None:
    body = openapi["paths"]["/v1/search"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    request = component(openapi, body)
    filters = component(openapi, given(request, "filters"))
    weights = component(openapi, given(request, "weights"))

    assert (given(request, "min_score")["minimum"], given(request, "min_score")["maximum"]) == (0, 1)
    assert given(request, "offset")["minimum"] == 0
    assert {leg: given(weights, leg)["minimum"] for leg in ("semantic", "lexical")} == {"semantic": 0, "lexical": 0}
    assert weights["additionalProperties"] is False
    assert filters["properties"]["tags"]["items"] == {"type": "string", "minLength": 1, "maxLength": 128}
    level_item = next(option for option in filters["properties"]["level"]["anyOf"] if option.get("type") == "string")
    assert "pattern" in level_item


def test_the_fusion_options_refusal_and_unused_options_are_described(openapi) -> None:
    body = openapi["paths"]["/v1/search"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    request = component(openapi, body)
    parameters = {item["name"]: item for item in openapi["paths"]["/memory/query"]["get"]["parameters"]}
    schemas = openapi["components"]["schemas"]
    response = schemas["SearchResponse"]["properties"]

    descriptions = [request["properties"][name]["description"] for name in ("fusion", "weights", "rrf_k")]
    descriptions.append(parameters["fusion"]["description"])

    assert all("strategy` lexical, semantic or cascading a 400" in text for text in descriptions)
    assert all("query_analysis.unused_options" in text for text in descriptions)
    assert "RANKING_ALGORITHM is not rrf, unused" in request["properties"]["rrf_k"]["description"]
    assert "fuses nothing" in schemas["QueryAnalysisOut"]["properties"]["unused_options"]["description"]
    assert "up to 1,000 hits per leg" in response["leg_rankings"]["description"]  # the bound of an explain's size


def given(schema: dict[str, Any], name: str) -> dict[str, Any]:
    """The schema of an optional property when it is given (its branch that is not null)."""
    field = schema["properties"][name]
    options = field.get("anyOf") or field.get("oneOf") or [field]
    return next(option for option in options if option.get("type") != "null")


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


PUBLIC_PATHS = {"/healthz", "/readyz", "/metrics"}
HTTP_METHODS = {"get", "post", "put", "patch", "delete"}


def operations(openapi: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (path, method, operation)
        for path, item in openapi["paths"].items()
        for method, operation in item.items()
        if method in HTTP_METHODS
    ]


def test_every_error_an_operation_declares_is_problem_json(openapi) -> None:
    wrong = [
        f"{method.upper()} {path} {status}: {sorted(response.get('content', {}))}"
        for path, method, operation in operations(openapi)
        for status, response in operation["responses"].items()
        if int(status) >= 400 and path != "/readyz" and set(response.get("content", {})) != {"application/problem+json"}
    ]

    assert wrong == []


def test_every_guarded_operation_declares_401_and_403(openapi) -> None:
    missing = [
        f"{method.upper()} {path}"
        for path, method, operation in operations(openapi)
        if path not in PUBLIC_PATHS and not {"401", "403"} <= set(operation["responses"])
    ]

    assert missing == []


def test_406_408_414_and_431_are_described_once_as_answers_any_operation_may_give(openapi) -> None:
    # The HTTP layer answers them on any route (a late head or body, a head over 64 KiB, an `Accept` without
    # JSON); the document said none. Described once, in `components.responses` and the document's description.
    responses = openapi["components"]["responses"]
    timeout, too_large = responses["RequestTimeout"], responses["RequestHeaderFieldsTooLarge"]
    not_acceptable = responses["NotAcceptable"]
    declared = {status for _, _, operation in operations(openapi) for status in operation["responses"]}

    uri_too_long = responses["Request-URITooLong"]

    assert set(responses) == {"NotAcceptable", "RequestTimeout", "Request-URITooLong", "RequestHeaderFieldsTooLarge"}
    for response in (timeout, uri_too_long, too_large, not_acceptable):
        assert set(response["content"]) == {"application/problem+json"}
        assert {"type", "title", "status", "detail"} <= set(
            component(openapi, response["content"]["application/problem+json"]["schema"])["required"]
        )
    assert "20 s" in timeout["description"]
    assert "16 KiB/s" in timeout["description"]
    assert "65536 bytes" in too_large["description"]
    assert "65536 bytes" in uri_too_long["description"]
    assert "/metrics" in not_acceptable["description"]
    for status, name in (
        ("406", "NotAcceptable"),
        ("408", "RequestTimeout"),
        ("414", "Request-URITooLong"),
        ("431", "RequestHeaderFieldsTooLarge"),
    ):
        assert f"{status} (`#/components/responses/{name}`)" in openapi["info"]["description"]
    assert {"406", "408", "414", "431"} & declared == set()


@pytest.mark.parametrize(
    ("method", "statuses"), [("get", {"400", "404", "503"}), ("delete", {"400", "404", "409", "503"})]
)
def test_reading_and_deleting_a_document_declare_not_found(openapi, method: str, statuses: set[str]) -> None:
    operation = openapi["paths"]["/v1/projects/{project}/documents/{document_id}"][method]

    assert statuses <= set(operation["responses"])


def test_ingest_declares_its_body_and_conflict_and_size_errors(openapi) -> None:
    operation = openapi["paths"]["/v1/projects/{project}/documents"]["post"]
    body = operation["requestBody"]["content"]["application/json"]["schema"]

    assert {"400", "409", "413", "503"} <= set(operation["responses"])
    assert [component(openapi, option)["title"] for option in body["oneOf"]] == ["DocumentIn", "DocumentBatchIn"]
    assert component(openapi, body["oneOf"][0])["additionalProperties"] is False


async def test_the_ingest_body_states_this_servers_batch_and_size_limits(tmp_path) -> None:
    # It said `maxItems: 10000` (the setting's ceiling) while the server refused a 501st document.
    app = create_app(api_settings(tmp_path, max_batch_documents=7, max_document_bytes=12345))
    schemas = (await AsyncTestClient(app=app, base_url="http://127.0.0.1").get("/schema/openapi.json")).json()[
        "components"
    ]["schemas"]

    assert schemas["DocumentBatchIn"]["properties"]["documents"]["maxItems"] == 7
    assert "12345 bytes" in schemas["DocumentIn"]["properties"]["text"]["description"]


async def test_the_batch_search_body_states_this_servers_query_limit(tmp_path) -> None:
    # It said `maxItems: 1000` (the setting's ceiling) while the server refused a 33rd query.
    app = create_app(api_settings(tmp_path, search_batch_max_queries=5))
    schemas = (await AsyncTestClient(app=app, base_url="http://127.0.0.1").get("/schema/openapi.json")).json()[
        "components"
    ]["schemas"]

    assert schemas["BatchSearchRequest"]["properties"]["queries"]["maxItems"] == 5


def test_the_document_fields_say_what_the_server_does_with_them(openapi) -> None:
    fields = openapi["components"]["schemas"]["DocumentIn"]["properties"]

    assert "naive" in fields["event_time"]["description"]
    assert "0001-01-01" in fields["event_time"]["description"]
    assert "white space" in fields["text"]["description"]
    assert "case" in fields["tags"]["description"]
    assert "64-bit float" in fields["metadata"]["description"]
    assert "NFC" in fields["title"]["description"]


@pytest.mark.parametrize(
    "name", ["SearchRequest", "SearchFields", "SearchFilters", "FusionWeights", "BatchSearchRequest"]
)
def test_request_objects_that_refuse_unknown_fields_say_so(openapi, name: str) -> None:
    assert openapi["components"]["schemas"][name]["additionalProperties"] is False


def test_path_projects_carry_the_project_id_pattern(openapi) -> None:
    patterns = {
        parameter["schema"].get("pattern")
        for path, _, operation in operations(openapi)
        for parameter in operation.get("parameters", [])
        if parameter["name"] == "project" and parameter["in"] == "path"
    }

    assert patterns == {PROJECT_ID_PATTERN}


def test_links_follow_a_document_from_ingest_to_read_search_and_delete(openapi) -> None:
    ids = {(path, method): operation["operationId"] for path, method, operation in operations(openapi)}
    document = "/v1/projects/{project}/documents/{document_id}"
    ingested = openapi["paths"]["/v1/projects/{project}/documents"]["post"]["responses"]["201"]["links"]
    deleted = openapi["paths"][document]["delete"]["responses"]["204"]["links"]

    assert ingested["ReadIngestedDocument"]["operationId"] == ids[(document, "get")]
    assert ingested["ReadIngestedDocument"]["parameters"]["document_id"] == "$response.body#/documents/0/id"
    assert ingested["DeleteIngestedDocument"]["operationId"] == ids[(document, "delete")]
    assert ingested["SearchProject"]["requestBody"] == {"project": "$request.path.project"}
    assert deleted["ReadDeletedDocument"]["operationId"] == ids[(document, "get")]


def test_metrics_are_documented_as_the_text_they_are(openapi) -> None:
    assert set(openapi["paths"]["/metrics"]["get"]["responses"]["200"]["content"]) == {"text/plain"}


def test_every_operation_carries_its_description(openapi) -> None:
    # Each handler's docstring (the admin scope of a project delete, the zeros of an unknown project's stats,
    # what a conditional write does) reached no reader: no operation had a description.
    undescribed = [
        f"{method.upper()} {path}"
        for path, method, operation in operations(openapi)
        if not operation.get("description")
    ]

    assert undescribed == []
    assert "`admin` scope" in openapi["paths"]["/v1/projects/{project}"]["delete"]["description"]
    assert "Unknown project: zeros" in openapi["paths"]["/v1/projects/{project}"]["get"]["description"]


def test_reindex_answers_a_described_shape(openapi) -> None:
    # It was an untyped object: nothing said what a rebuild answers, or that an unknown project queues 0.
    operation = openapi["paths"]["/v1/projects/{project}/reindex"]["post"]
    answer = component(openapi, operation["responses"]["200"]["content"]["application/json"]["schema"])

    assert set(answer["required"]) == {"project", "queued_documents"}
    assert answer["properties"]["queued_documents"]["type"] == "integer"
    assert "queues 0" in operation["description"]
    assert "`admin` scope" in operation["description"]


def descriptions(schema: dict[str, Any]) -> str:
    return " ".join([schema.get("description", "")] + [item.get("description", "") for item in schema.get("anyOf", [])])


def test_every_time_a_search_or_listing_takes_is_described_as_truncated_to_the_microsecond(openapi) -> None:
    schemas = openapi["components"]["schemas"]
    listing = openapi["paths"]["/v1/projects/{project}/documents"]["get"]["parameters"]
    query = openapi["paths"]["/memory/query"]["get"]["parameters"]
    described = [
        descriptions(schemas["SearchFilters"]["properties"]["date_from"]),
        descriptions(schemas["SearchFilters"]["properties"]["date_to"]),
        descriptions(schemas["SearchRequest"]["properties"]["as_of"]),
        descriptions(schemas["SearchFields"]["properties"]["as_of"]),
        *(p["description"] for p in listing if p["name"] in {"event_time_from", "event_time_to", "updated_since"}),
        *(p["description"] for p in query if p["name"] == "as_of"),
    ]

    assert len(described) == 8
    assert all("kept to the microsecond: digits past it are dropped, not rounded" in text for text in described)
