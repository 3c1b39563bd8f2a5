"""The client matches the live service's OpenAPI document: every operation has a client method, every
field a client model declares exists in the schema (with a compatible type, required where the client
requires it), and every request option of the schema can be sent.
"""

from __future__ import annotations

import inspect
import typing
from datetime import UTC, datetime
from http import HTTPStatus
from typing import Any

import httpx
import msgspec
import pytest
from poimen_client.calls import Endpoint
from poimen_client.clients import AsyncPoimenClient, PoimenClient
from poimen_client.endpoints import MEMORY_QUERY_FIELDS, Endpoints
from poimen_client.errors import ServiceError, error_from_response
from poimen_client.models import (
    INGEST_STATUSES,
    Document,
    DocumentFilter,
    Fusion,
    FusionWeights,
    IngestResponse,
    Problem,
    SearchFilters,
    SearchQuery,
    Strategy,
)
from poimen_client.project_ids import PROJECT_ID_PATTERN

pytestmark = pytest.mark.integration

ENDPOINTS: dict[str, Endpoint[Any, Any]] = {
    name: value for name, value in vars(Endpoints).items() if isinstance(value, Endpoint)
}
FREE_FORM_ANSWERS = {"flags", "liveness", "readiness", "metrics"}
"""Endpoints whose success schema is an untyped object (or text): their models are checked by the live tests."""
JSON_TYPES: dict[type[msgspec.inspect.Type], set[str]] = {
    msgspec.inspect.StrType: {"string"},
    msgspec.inspect.IntType: {"integer"},
    msgspec.inspect.FloatType: {"number", "integer"},
    msgspec.inspect.BoolType: {"boolean"},
    msgspec.inspect.DateTimeType: {"string"},
    msgspec.inspect.LiteralType: {"string"},
    msgspec.inspect.ListType: {"array"},
    msgspec.inspect.DictType: {"object"},
    msgspec.inspect.StructType: {"object"},
}


@pytest.fixture(scope="module")
def openapi(service_url: str) -> dict[str, Any]:
    response = httpx.get(f"{service_url}/schema/openapi.json", timeout=10.0)
    response.raise_for_status()
    document: dict[str, Any] = response.json()
    return document


def resolve(openapi: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """The schema behind a `$ref`, and the non-null option of a nullable `oneOf`."""
    if "$ref" in schema:
        return resolve(openapi, openapi["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]])
    options = [option for option in schema.get("oneOf", schema.get("anyOf", [])) if option.get("type") != "null"]
    return resolve(openapi, options[0]) if len(options) == 1 else schema


def schema_types(schema: dict[str, Any]) -> set[str]:
    declared = schema.get("type", [])
    return ({declared} if isinstance(declared, str) else set(declared)) - {"null"}


def mismatches(
    openapi: dict[str, Any],
    model: msgspec.inspect.Type,
    schema: dict[str, Any],
    path: str,
    *,
    every_field: bool = False,
) -> list[str]:
    """How `model` (a client type) disagrees with `schema`: fields missing, not required, of another type.

    `every_field` (an answer): also each field the schema has and the client does not read, which it drops.
    """
    schema = resolve(openapi, schema)
    if isinstance(model, msgspec.inspect.UnionType):
        members = [member for member in model.types if not isinstance(member, msgspec.inspect.NoneType)]
        return [
            problem
            for member in members
            for problem in mismatches(openapi, member, schema, path, every_field=every_field)
        ]
    if isinstance(model, msgspec.inspect.AnyType) or not schema_types(schema):
        return []
    expected = JSON_TYPES.get(type(model), set())
    if not expected & schema_types(schema):
        return [f"{path}: the client reads {type(model).__name__}, the schema says {sorted(schema_types(schema))}"]
    if isinstance(model, msgspec.inspect.ListType):
        return mismatches(openapi, model.item_type, schema.get("items", {}), f"{path}[]", every_field=every_field)
    if not isinstance(model, msgspec.inspect.StructType):
        return []
    properties, required = schema.get("properties", {}), set(schema.get("required", []))
    problems = []
    for field in model.fields:
        where = f"{path}.{field.encode_name}"
        if field.encode_name not in properties:
            problems.append(f"{where}: not in the schema")
            continue
        if field.required and field.encode_name not in required:
            problems.append(f"{where}: required by the client, optional in the schema")
        problems.extend(mismatches(openapi, field.type, properties[field.encode_name], where, every_field=every_field))
    if every_field:
        read = {field.encode_name for field in model.fields}
        problems.extend(
            f"{path}.{name}: the service sends it, the client drops it" for name in properties if name not in read
        )
    return problems


def success(openapi: dict[str, Any], endpoint: Endpoint[Any, Any]) -> tuple[int, dict[str, Any]]:
    responses = openapi["paths"][endpoint.path][endpoint.method.lower()]["responses"]
    status = min(int(code) for code in responses if code.startswith("2"))
    return status, responses[str(status)]


def parameters(openapi: dict[str, Any], endpoint: Endpoint[Any, Any], location: str) -> set[str]:
    operation = openapi["paths"][endpoint.path][endpoint.method.lower()]
    return {item["name"] for item in operation.get("parameters", []) if item["in"] == location}


def struct_fields(model: type[msgspec.Struct]) -> set[str]:
    info = msgspec.inspect.type_info(model)
    assert isinstance(info, msgspec.inspect.StructType)
    return {field.encode_name for field in info.fields}


def test_every_operation_of_the_document_has_a_client_method(openapi) -> None:
    documented = {(method.upper(), path) for path, operations in openapi["paths"].items() for method in operations}

    covered = {(endpoint.method, endpoint.path) for endpoint in ENDPOINTS.values()}

    assert documented - covered == set()
    assert covered - documented == set()


def test_every_endpoint_is_a_method_of_both_clients_with_the_builders_signature() -> None:
    sync_client, async_client = PoimenClient("http://127.0.0.1:9"), AsyncPoimenClient("http://127.0.0.1:9")

    for name, endpoint in ENDPOINTS.items():
        for client in (sync_client, async_client):
            method = getattr(client, name)
            assert inspect.signature(method) == inspect.signature(endpoint.build)
            assert method.__doc__ == endpoint.build.__doc__
            assert method.__doc__


@pytest.mark.parametrize("name", sorted(set(ENDPOINTS) - FREE_FORM_ANSWERS))
def test_response_model_fields_exist_in_the_schema(openapi, name: str) -> None:
    endpoint = ENDPOINTS[name]
    status, response = success(openapi, endpoint)

    if endpoint.response_type is type(None):
        assert status == 204
        assert "content" not in response
        return
    schema = response["content"]["application/json"]["schema"]
    assert "properties" in resolve(openapi, schema), f"{name}: the schema does not type its answer"
    assert mismatches(openapi, msgspec.inspect.type_info(endpoint.response_type), schema, name, every_field=True) == []


def test_free_form_answers_are_exactly_the_known_ones(openapi) -> None:
    untyped = set()
    for name, endpoint in ENDPOINTS.items():
        _, response = success(openapi, endpoint)
        schema = response.get("content", {}).get("application/json", {}).get("schema", {})
        if "content" in response and "properties" not in resolve(openapi, schema):
            untyped.add(name)

    assert untyped == FREE_FORM_ANSWERS


def test_search_query_sends_only_and_every_option_of_a_search(openapi) -> None:
    body = resolve(
        openapi, openapi["paths"]["/v1/search"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    )

    assert struct_fields(SearchQuery) | {"project"} == set(body["properties"])
    assert mismatches(openapi, msgspec.inspect.type_info(SearchQuery), body, "SearchQuery") == []


def test_search_query_is_every_option_of_a_batch_query(openapi) -> None:
    body = resolve(
        openapi, openapi["paths"]["/v1/search/batch"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    )
    query = resolve(openapi, body["properties"]["queries"]["items"])

    assert set(body["properties"]) == {"project", "queries"}
    assert struct_fields(SearchQuery) == set(query["properties"])
    assert mismatches(openapi, msgspec.inspect.type_info(SearchQuery), query, "queries[]") == []


@pytest.mark.parametrize(("model", "component"), [(SearchFilters, "SearchFilters"), (FusionWeights, "FusionWeights")])
def test_search_option_models_match_their_schemas(openapi, model: type[msgspec.Struct], component: str) -> None:
    schema = openapi["components"]["schemas"][component]

    assert struct_fields(model) == set(schema["properties"])
    assert mismatches(openapi, msgspec.inspect.type_info(model), schema, component) == []


def test_memory_query_sends_every_query_parameter(openapi) -> None:
    assert parameters(openapi, ENDPOINTS["memory_query"], "query") == MEMORY_QUERY_FIELDS | {"project"}


@pytest.mark.parametrize(("name", "extra"), [("list_documents", {"limit", "cursor"}), ("delete_documents", set())])
def test_document_filter_is_every_filter_parameter(openapi, name: str, extra: set[str]) -> None:
    assert parameters(openapi, ENDPOINTS[name], "query") == struct_fields(DocumentFilter) | extra


def pattern_of(openapi: dict[str, Any], schema: dict[str, Any]) -> str | None:
    """A string schema's pattern, also where it sits beside a nullable `oneOf` (a query parameter's)."""
    return schema.get("pattern") or resolve(openapi, schema).get("pattern")


def test_the_client_checks_project_ids_by_the_services_own_pattern(openapi) -> None:
    patterns: dict[str, str | None] = {}
    for path, operations in openapi["paths"].items():
        for method, operation in operations.items():
            for item in operation.get("parameters", []):
                if item["name"] == "project":
                    patterns[f"{method} {path} ({item['in']})"] = pattern_of(openapi, item["schema"])
            body = operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
            properties = resolve(openapi, body).get("properties", {}) if body else {}
            if "project" in properties:
                patterns[f"{method} {path} (body)"] = pattern_of(openapi, properties["project"])

    taking_a_project = [
        name for name, endpoint in ENDPOINTS.items() if "project" in inspect.signature(endpoint.build).parameters
    ]
    assert len(patterns) == len(taking_a_project)
    assert {where: pattern for where, pattern in patterns.items() if pattern != PROJECT_ID_PATTERN} == {}


@pytest.mark.parametrize(
    "name",
    sorted(name for name, endpoint in ENDPOINTS.items() if "project" in inspect.signature(endpoint.build).parameters),
)
def test_every_method_taking_a_project_refuses_one_outside_the_rule(name: str) -> None:
    required = {
        "query": "q", "queries": ["q"], "documents": Document(id="d", text="t"), "document_id": "d",
        "where": DocumentFilter(tag="t"),
    }  # fmt: skip
    arguments = {
        parameter: required[parameter]
        for parameter, spec in inspect.signature(ENDPOINTS[name].build).parameters.items()
        if parameter != "project" and spec.default is inspect.Parameter.empty
    }

    with PoimenClient("http://127.0.0.1:9") as client, pytest.raises(ValueError, match="not a project id"):
        getattr(client, name)("team/notes", **arguments)  # nothing listens at :9: a send would be a TransportError


STATUS_BY_PHRASE = {status.phrase.replace(" ", ""): status.value for status in HTTPStatus}
"""`RequestTimeout` -> 408: the document names each response any operation may give after its status."""


def test_every_error_status_of_the_document_has_its_own_error_class(openapi) -> None:
    statuses = {int(status) for operations in openapi["paths"].values() for operation in operations.values()
                for status in operation["responses"] if int(status) >= 400}  # fmt: skip
    statuses |= {STATUS_BY_PHRASE[name] for name in openapi["components"].get("responses", {})}
    request = httpx.Request("GET", "http://127.0.0.1:9/v1/projects/p")

    classes = {status: type(error_from_response(httpx.Response(status, request=request))) for status in statuses}

    assert {status: error_class for status, error_class in classes.items() if error_class is ServiceError} == {}


@pytest.mark.parametrize("name", ["ingest", "delete_document"])
def test_if_match_is_a_header_of_the_versioned_writes(openapi, name: str) -> None:
    assert "If-Match" in parameters(openapi, ENDPOINTS[name], "header")


def test_ingest_accepts_every_field_of_the_document_model(service_url: str, unique_name: str) -> None:
    # The document does not declare the ingest body (the service reads it raw), and the service answers
    # 400 naming any unknown field: an ingest with every field set is the check.
    document = Document(
        id="every-field", text="# T\n\nBody.", source="s/x.md", title="T", tags=["t"], metadata={"k": 1},
        event_time=datetime(2024, 1, 1, tzinfo=UTC), context="before", expected_version=0,
    )  # fmt: skip
    assert set(msgspec.to_builtins(document)) == struct_fields(Document)

    with PoimenClient(service_url) as client:
        answer = client.ingest(unique_name, document)

    assert answer.documents[0].status == "created"


def test_the_problem_model_reads_every_field_of_the_services_error_bodies(openapi) -> None:
    # `refused_status`, `current_version`, `reasons`...: an error attribute the client drops is one a caller lacks.
    errors = [
        response
        for operations in openapi["paths"].values()
        for operation in operations.values()
        for status, response in operation["responses"].items()
        if int(status) >= 400
    ]
    errors.extend(openapi["components"].get("responses", {}).values())  # 408, 414, 431: any operation may give them
    schemas = {
        response["content"]["application/problem+json"]["schema"]["$ref"]
        for response in errors
        if "application/problem+json" in response.get("content", {})
    }

    assert len(schemas) == 1
    problem = {"$ref": schemas.pop()}
    assert mismatches(openapi, msgspec.inspect.type_info(Problem), problem, "Problem", every_field=True) == []


def enum_of(openapi: dict[str, Any], schema: dict[str, Any]) -> set[str]:
    options = schema.get("anyOf", schema.get("oneOf", [schema]))
    return {value for option in options for value in resolve(openapi, option).get("enum", [])}


@pytest.mark.parametrize(("option", "values"), [("strategy", Strategy), ("fusion", Fusion)])
def test_the_clients_literals_are_the_services_enums(openapi, option: str, values: object) -> None:
    # A value the service added and the client's Literal lacks cannot be sent (a ValueError before sending).
    body = resolve(
        openapi, openapi["paths"]["/v1/search"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    )

    assert enum_of(openapi, body["properties"][option]) == set(typing.get_args(values))


def test_the_ingest_statuses_the_client_knows_are_the_services(openapi) -> None:
    _, response = success(openapi, ENDPOINTS["ingest"])
    answer = resolve(openapi, response["content"]["application/json"]["schema"])
    outcome = resolve(openapi, answer["properties"]["documents"]["items"])

    assert ENDPOINTS["ingest"].response_type is IngestResponse
    assert enum_of(openapi, outcome["properties"]["status"]) == INGEST_STATUSES
