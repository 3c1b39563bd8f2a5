"""What the API document says beyond what Litestar derives from the handlers, so that it tells the whole truth.

- The search request objects are described by msgspec, which decodes them, with every bound it checks:
  Litestar's own reading dropped `minimum: 0` (of `min_score`, `offset`, `weights`), the items' patterns and
  lengths (`filters.tags`, `filters.level`), and said nothing of `additionalProperties: false`.
- `POST .../documents` reads its body itself (one document, or `{"documents": [...]}`, which msgspec cannot
  convert as one untagged union); its body is described here from the same Structs it is decoded with.
- OpenAPI links tie the write path together (ingest -> read / list / stats / search -> delete -> read),
  so stateful clients and fuzzers (schemathesis) can follow a document through its life.
- 408, 414 and 431 come from the HTTP layer on any route (`app.api.request_head`, `app.api.overload`): described
  once, as `components.responses` named after their status phrase and in the document's description, rather
  than on every operation.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import TYPE_CHECKING, Final, cast

import msgspec
from litestar.openapi.spec import Link, OpenAPIMediaType, OpenAPIResponse, Reference, RequestBody, Schema

from app.api.document_schemas import DocumentBatchIn, DocumentIn
from app.api.errors import PROBLEM_MEDIA_TYPE, ProblemOut
from app.api.overload import REQUEST_BODY_MIN_RATE_BYTES_PER_S, REQUEST_BODY_TIMEOUT_S
from app.api.request_head import MAX_REQUEST_HEAD_BYTES, REQUEST_HEAD_TIMEOUT_S
from app.api.search_requests import BatchSearchRequest, FusionWeights, SearchFields, SearchFilters, SearchRequest

if TYPE_CHECKING:
    from litestar.openapi.spec import OpenAPI, Operation

COMPONENT_REF: Final = "#/components/schemas/{name}"
CLOSED_REQUEST_STRUCTS: Final = (SearchRequest, SearchFields, SearchFilters, FusionWeights, BatchSearchRequest)
DOCUMENTS_PATH: Final = "/v1/projects/{project}/documents"
DOCUMENT_PATH: Final = "/v1/projects/{project}/documents/{document_id}"
PROJECT_PATH: Final = "/v1/projects/{project}"
SEARCH_PATH: Final = "/v1/search"
INGESTED_ID: Final = "$response.body#/documents/0/id"
ANY_OPERATION_PROBLEMS: Final = {
    HTTPStatus.NOT_ACCEPTABLE: (
        "The request's `Accept` admits neither application/json nor application/problem+json, all an operation"
        " answers (`q=0` refuses a type). Nothing was done with the request; send `Accept: application/json`,"
        " `*/*`, or none. Not from /metrics, which answers its text format whatever `Accept` says"
    ),
    HTTPStatus.REQUEST_TIMEOUT: (
        f"The request line and headers were not whole {REQUEST_HEAD_TIMEOUT_S:g} s after the connection opened (or"
        " after the first byte of a kept-alive connection's next request), or the body came slower than"
        f" {REQUEST_BODY_MIN_RATE_BYTES_PER_S / 1024:g} KiB/s after its first {REQUEST_BODY_TIMEOUT_S:g} s. Nothing"
        " was done with the request, and the connection is closed; the same request over as slow a link would be"
        " cut off again"
    ),
    HTTPStatus.REQUEST_URI_TOO_LONG: (
        f"The request target (the URL, its query string included) alone is over the {MAX_REQUEST_HEAD_BYTES} bytes"
        " a request line and headers may hold together. The request reaches no route, and the connection is closed"
    ),
    HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE: (
        f"The request line and headers together are over {MAX_REQUEST_HEAD_BYTES} bytes (a bearer token is at most"
        " 16,384 characters). The request reaches no route, and the connection is closed"
    ),
}
"""Answers the HTTP layer gives whatever the route, before (or instead of) the route's own."""


def complete_openapi(
    document: OpenAPI, *, max_batch_documents: int, max_document_bytes: int, search_batch_max_queries: int
) -> None:
    """Add to Litestar's document what it cannot derive; call once, before the document is first served.

    The ingest and batch search bodies state this server's limits (`MAX_BATCH_DOCUMENTS`, `MAX_DOCUMENT_BYTES`,
    `SEARCH_BATCH_MAX_QUERIES`), not the ceilings their decoders are built with.
    """
    _, components = msgspec.json.schema_components(CLOSED_REQUEST_STRUCTS, ref_template=COMPONENT_REF)
    components[BatchSearchRequest.__name__]["properties"]["queries"]["maxItems"] = search_batch_max_queries
    # msgspec's JSON Schema dicts are serialised as they are; Litestar's `Schema` type is only their typed form.
    document.components.schemas.update(cast("dict[str, Schema]", components))
    _describe_ingest_body(document, max_batch_documents=max_batch_documents, max_document_bytes=max_document_bytes)
    _link_document_lifecycle(document)
    _describe_any_operation_problems(document)


def _describe_any_operation_problems(document: OpenAPI) -> None:
    problem = Reference(ref=COMPONENT_REF.format(name=ProblemOut.__name__))
    named: list[str] = []
    for status, description in ANY_OPERATION_PROBLEMS.items():
        name = status.phrase.replace(" ", "")  # `RequestTimeout`: a client maps the name back to its status
        document.components.responses = {
            **(document.components.responses or {}),
            name: OpenAPIResponse(
                description=description, content={PROBLEM_MEDIA_TYPE: OpenAPIMediaType(schema=problem)}
            ),
        }
        named.append(f"{status.value} (`#/components/responses/{name}`)")
    document.info.description = (
        f"{document.info.description or ''}\n\nAny operation may also answer {' or '.join(named)} as problem+json,"
        " from the server's HTTP layer whatever the route: described there once, not on each operation."
    ).strip()


def _operation(document: OpenAPI, path: str, method: str) -> Operation:
    path_item = (document.paths or {})[path]
    operation: Operation = getattr(path_item, method)
    return operation


def _describe_ingest_body(document: OpenAPI, *, max_batch_documents: int, max_document_bytes: int) -> None:
    (single, batch), components = msgspec.json.schema_components(
        (DocumentIn, DocumentBatchIn), ref_template=COMPONENT_REF
    )
    components[DocumentBatchIn.__name__]["properties"]["documents"]["maxItems"] = max_batch_documents
    text = components[DocumentIn.__name__]["properties"]["text"]
    text["description"] += (
        f". Text and metadata (as compact JSON) together at most {max_document_bytes} bytes of UTF-8 (413)"
    )
    # A document needs its text under one of two names (`decode_documents` refuses one without).
    components[DocumentIn.__name__]["anyOf"] = [
        {"required": [name], "properties": {name: {"type": "string"}}} for name in ("text", "markdown")
    ]
    # msgspec's JSON Schema dicts are serialised as they are; Litestar's `Schema` type is only their typed form.
    document.components.schemas.update(cast("dict[str, Schema]", components))
    _operation(document, DOCUMENTS_PATH, "post").request_body = RequestBody(
        content={
            "application/json": OpenAPIMediaType(
                schema=Schema(one_of=[Reference(ref=single["$ref"]), Reference(ref=batch["$ref"])])
            )
        },
        description='One document, or `{"documents": [...]}` written atomically',
        required=True,
    )


def _link_document_lifecycle(document: OpenAPI) -> None:
    read = _operation(document, DOCUMENT_PATH, "get").operation_id
    remove = _operation(document, DOCUMENT_PATH, "delete").operation_id
    same_project = {"project": "$request.path.project"}
    same_document = {**same_project, "document_id": "$request.path.document_id"}
    ingested = {**same_project, "document_id": INGESTED_ID}
    links = {
        (DOCUMENTS_PATH, "post", "201"): {
            "ReadIngestedDocument": Link(operation_id=read, parameters=ingested),
            "DeleteIngestedDocument": Link(operation_id=remove, parameters=ingested),
            "ListProjectDocuments": Link(
                operation_id=_operation(document, DOCUMENTS_PATH, "get").operation_id, parameters=same_project
            ),
            "ProjectStats": Link(
                operation_id=_operation(document, PROJECT_PATH, "get").operation_id, parameters=same_project
            ),
            "SearchProject": Link(
                operation_id=_operation(document, SEARCH_PATH, "post").operation_id,
                request_body={"project": "$request.path.project"},
            ),
        },
        (DOCUMENT_PATH, "get", "200"): {"DeleteReadDocument": Link(operation_id=remove, parameters=same_document)},
        (DOCUMENT_PATH, "delete", "204"): {"ReadDeletedDocument": Link(operation_id=read, parameters=same_document)},
    }
    for (path, method, status), named_links in links.items():
        responses = _operation(document, path, method).responses or {}
        response = responses[status]
        if isinstance(response, Reference):
            continue
        response.links = {**(response.links or {}), **named_links}
