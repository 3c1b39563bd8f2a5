"""Document endpoints: write, read and delete a project's documents. PostgreSQL has a write when we answer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Final
from urllib.parse import quote

from litestar import Controller, Request, Response, delete, get, post
from litestar.datastructures import ResponseHeader, State
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import PathParameter, QueryParameter
from litestar.status_codes import HTTP_200_OK, HTTP_201_CREATED, HTTP_304_NOT_MODIFIED

from app.api.cursors import encode_cursor, keyset_after
from app.api.dependencies import Injected
from app.api.document_bodies import decode_documents, located
from app.api.document_schemas import (
    DocumentOut,
    IngestOutcomeOut,
    IngestResponse,
    document_out,
)
from app.api.entity_tags import (
    ETAG_HEADER,
    IfMatchHeader,
    IfNoneMatchHeader,
    ReadIfMatchHeader,
    ReadIfNoneMatchHeader,
    check_read_precondition,
    entity_tag,
    expected_version,
    holds_tag,
    version_from,
)
from app.api.errors import problem_responses
from app.api.guards import ingest_guard, search_guard
from app.api.project_routes import (
    NO_NUL_PATTERN,
    PROJECT_ERROR_RESPONSES,
    PROJECT_WRITE_ERROR_RESPONSES,
    EventFrom,
    EventTo,
    ProjectPath,
    SourcePrefix,
    Tag,
    UpdatedSince,
    document_selection,
)
from app.api.project_schemas import DeletedOut, DocumentListOut, summary_out
from app.api.strict_bodies import READS_BODY
from app.config import Settings
from app.domain.errors import DocumentNotFoundError, InvalidInputError
from app.ingestion.admission import shared_allowance, shared_keyed_allowances
from app.ingestion.catalog import MAX_PAGE_SIZE, ProjectCatalog
from app.ingestion.pipeline import IngestionPipeline, IngestOutcome
from app.observability.metrics import record_ingested
from app.wiring.services import Services

MAX_INGEST_BODY_BYTES: Final = 16 * 1024 * 1024
"""The largest ingest body: a document at MAX_DOCUMENT_BYTES fits with room for JSON escapes. At 64 MiB one
request took a replica past the chart's 2 GiB (docs/operations.md "Memory per pod")."""
INGEST_BODY_BYTES_IN_FLIGHT: Final = 2 * MAX_INGEST_BODY_BYTES
"""Ingest body bytes (as `Content-Length` declares them) one process reads and holds at once; more wait unread."""
PROJECT_INGEST_BODY_BYTES_IN_FLIGHT: Final = MAX_INGEST_BODY_BYTES
"""Of those, what one project's writes hold at once: its other writes wait on their own, and other projects' still
fit. Two slow maximal bodies of one project (16 KiB/s keeps a body's deadline for 17 minutes) took it all."""
_BODIES_IN_FLIGHT: Final = "ingest_bodies_in_flight"
_PROJECT_BODIES_IN_FLIGHT: Final = "ingest_bodies_in_flight_per_project"


def _declared_bytes(request: Request[Any, Any, State]) -> int:
    """The body's `Content-Length`, or the most it may be when it declares none (chunked) or nonsense."""
    declared = request.headers.get("content-length", "")
    return (
        min(int(declared), MAX_INGEST_BODY_BYTES)
        if declared.isascii() and declared.isdigit()
        else MAX_INGEST_BODY_BYTES
    )


DocumentIdPath = Annotated[
    str,
    PathParameter(
        description=(
            "Document id; may contain `/`. Percent-encode its UTF-8 bytes (`%2F` reads as `/`): escapes that"
            " are not UTF-8 are a 400"
        ),
        pattern=NO_NUL_PATTERN,
    ),
]
DOCUMENTS_CURSOR = "documents"
LOCATION_HEADER = ResponseHeader(
    name="Location",
    description="A one-document write: where to read (`GET`), or delete, the document it wrote. Not on a batch",
    documentation_only=True,
)


WRITTEN_ETAG_HEADER = ResponseHeader(
    name="ETag",
    description=(
        'A one-document write: the ETag of the document at `Location` as a `GET` would give it now (`"7-pending"`'
        " until the lexical index has that version), to send back as `If-Match`. Not on a batch"
    ),
    documentation_only=True,
)


def _not_found(project: str, document_id: str) -> DocumentNotFoundError:
    return DocumentNotFoundError(f"no document {document_id!r} in project {project!r}")


class DocumentController(Controller):
    """Ingestion: write, list, read and delete a project's documents."""

    path = "/v1/projects/{project:str}/documents"
    tags = ["documents"]  # noqa: RUF012 - Litestar reads it as a class attribute

    @post(
        "/",
        summary="Ingest one document or a batch",
        status_code=HTTP_201_CREATED,
        guards=[ingest_guard],
        opt=READS_BODY,
        request_max_body_size=MAX_INGEST_BODY_BYTES,
        response_headers=[LOCATION_HEADER, WRITTEN_ETAG_HEADER],
        responses={
            HTTP_200_OK: ResponseSpec(
                data_container=IngestResponse,
                description="Nothing created: every document was replaced (`updated`) or found `unchanged`",
            ),
            **problem_responses(400, 401, 403, 409, 413, 415, 503, 504, 507),
        },
    )
    async def ingest(  # noqa: PLR0913, PLR0917 - the body and each conditional header it may carry
        self,
        request: Request[Any, Any, State],
        project: ProjectPath,
        settings: Injected[Settings],
        pipeline: Injected[IngestionPipeline],
        if_match: IfMatchHeader = None,
        if_none_match: IfNoneMatchHeader = None,
    ) -> Response[IngestResponse]:
        """Body: one document `{id, text|markdown, source, title, tags, event_time, metadata, context}`, or a batch.

        Concurrent writes of one document apply in the order they arrived, on any replica. To update
        safely, send the version last read (`expected_version`, or `If-Match` for a single document):
        a document stored at another version answers 409 and nothing of the request is written.
        `If-None-Match: *` (or `expected_version` 0) writes a document only if it does not exist yet.
        201 when a document was created, 200 when none was (each replaced, or found unchanged).
        """
        declared = _declared_bytes(request)
        state = request.app.state
        own = shared_keyed_allowances(state, _PROJECT_BODIES_IN_FLIGHT, PROJECT_INGEST_BODY_BYTES_IN_FLIGHT)
        async with (
            own.take(project, declared),
            shared_allowance(state, _BODIES_IN_FLIGHT, INGEST_BODY_BYTES_IN_FLIGHT).take(declared),
        ):
            # The heap is trimmed after the answer (app.api.overload), else the replica's RSS stays near its peak.
            return await _ingest(request, project, settings, pipeline, if_match=if_match, if_none_match=if_none_match)

    @get(
        "/",
        summary="List a project's documents (cursor pagination, filters)",
        guards=[search_guard],
        responses=PROJECT_ERROR_RESPONSES,
    )
    async def list_documents(  # noqa: PLR0913, PLR0917 - one parameter per query-string field
        self,
        project: ProjectPath,
        catalog: Injected[ProjectCatalog],
        limit: Annotated[int, QueryParameter(ge=1, le=MAX_PAGE_SIZE, description="Page size")] = 100,
        cursor: Annotated[str | None, QueryParameter(description="`next_cursor` of the previous page")] = None,
        source_prefix: SourcePrefix = None,
        tag: Tag = None,
        event_time_from: EventFrom = None,
        event_time_to: EventTo = None,
        updated_since: UpdatedSince = None,
    ) -> DocumentListOut:
        """Documents by id (code point order). Paging by id never repeats a document, even across writes."""
        after = keyset_after(cursor, kind=DOCUMENTS_CURSOR)
        selection = document_selection(
            project,
            source_prefix=source_prefix,
            tag=tag,
            event_time_from=event_time_from,
            event_time_to=event_time_to,
            updated_since=updated_since,
        )
        page = await catalog.page(selection, after=after, limit=limit)
        return DocumentListOut(
            project=project,
            items=[summary_out(item) for item in page.items],
            next_cursor=None
            if page.next_after is None
            else encode_cursor(DOCUMENTS_CURSOR, {"after": page.next_after}),
        )

    @delete(
        "/",
        summary="Delete the documents matching a filter",
        status_code=HTTP_200_OK,
        guards=[ingest_guard],
        responses=PROJECT_WRITE_ERROR_RESPONSES,
    )
    async def remove_matching(  # noqa: PLR0913, PLR0917 - one parameter per filter
        self,
        project: ProjectPath,
        catalog: Injected[ProjectCatalog],
        source_prefix: SourcePrefix = None,
        tag: Tag = None,
        event_time_from: EventFrom = None,
        event_time_to: EventTo = None,
        updated_since: UpdatedSince = None,
    ) -> DeletedOut:
        """Delete every document matching all given filters, in one transaction; at least one filter is required."""
        selection = document_selection(
            project,
            source_prefix=source_prefix,
            tag=tag,
            event_time_from=event_time_from,
            event_time_to=event_time_to,
            updated_since=updated_since,
        )
        if selection.is_everything:
            msg = (
                "give at least one filter (source_prefix, tag, event_time_from/to, updated_since); "
                "DELETE /v1/projects/{project} removes everything"
            )
            raise InvalidInputError(msg, field="source_prefix")
        deleted = await catalog.delete(selection)
        record_ingested(status="deleted", documents=deleted)
        return DeletedOut(project=project, deleted=deleted)

    @get(
        "/{document_id:path}",
        summary="A stored document with its chunks",
        guards=[search_guard],
        response_headers=[ETAG_HEADER],
        responses={
            HTTP_304_NOT_MODIFIED: ResponseSpec(
                data_container=None, description="If-None-Match names the stored version: no body, its ETag"
            ),
            **problem_responses(400, 401, 403, 404, 409, 503, 504),
        },
    )
    async def read(
        self,
        project: ProjectPath,
        document_id: DocumentIdPath,
        services: Injected[Services],
        if_match: ReadIfMatchHeader = None,
        if_none_match: ReadIfNoneMatchHeader = None,
    ) -> Response[DocumentOut]:
        """The document as PostgreSQL holds it, chunks in order with breadcrumbs. Ids may contain `/`.

        Its `ETag` is its version (`"7"`), what `If-Match` takes back; `If-None-Match` naming that version
        answers 304 without the body (a caller polling a document it holds). Until the lexical index has the
        document its tag is `"7-pending"`, so a caller holding that answer is sent the indexed one. `If-Match`
        naming another version answers 409 with `current_version`, as a write does.
        """
        document_id = document_id.removeprefix("/")
        document = await services.engines.store.get_document(project, document_id)
        if document is None:
            raise _not_found(project, document_id)
        check_read_precondition(if_match, document_id=document_id, version=document.version)
        headers = {ETAG_HEADER.name: entity_tag(document.version, lexically_indexed=document.lexically_indexed)}
        if if_none_match is not None and holds_tag(if_none_match, headers[ETAG_HEADER.name]):
            return Response(None, status_code=HTTP_304_NOT_MODIFIED, headers=headers)  # type: ignore[arg-type]
        return Response(document_out(document), headers=headers)

    @delete(
        "/{document_id:path}",
        summary="Delete a document and its chunks",
        guards=[ingest_guard],
        responses=problem_responses(400, 401, 403, 404, 409, 503, 504, 507),
    )
    async def remove(
        self,
        project: ProjectPath,
        document_id: DocumentIdPath,
        pipeline: Injected[IngestionPipeline],
        if_match: IfMatchHeader = None,
    ) -> None:
        """Delete from PostgreSQL now; the lexical index follows through the outbox (If-Match: 409 if stale)."""
        document_id = document_id.removeprefix("/")
        expected = None if if_match is None else version_from(if_match)
        if not await pipeline.delete(project, document_id, expected_version=expected):
            raise _not_found(project, document_id)
        record_ingested(status="deleted")


async def _ingest(  # noqa: PLR0913 - the handler's own parameters, passed on
    request: Request[Any, Any, State],
    project: str,
    settings: Settings,
    pipeline: IngestionPipeline,
    *,
    if_match: str | None,
    if_none_match: str | None,
) -> Response[IngestResponse]:
    """The ingest handler's work once its body has room (`INGEST_BODY_BYTES_IN_FLIGHT`)."""
    documents, batch = decode_documents(
        await request.body(),
        max_document_bytes=settings.max_document_bytes,
        max_batch_documents=settings.max_batch_documents,
    )
    expected = {d.id: d.expected_version for d in documents if d.expected_version is not None}
    for header, value in (("If-Match", if_match), ("If-None-Match", if_none_match)):
        if value is not None and len(documents) != 1:
            msg = f"{header} applies to one document; give each document of a batch its expected_version"
            raise InvalidInputError(msg, field=header)
    if len(documents) == 1:
        version = expected_version(documents[0], if_match=if_match, if_none_match=if_none_match)
        if version is not None:
            expected[documents[0].id] = version
    try:
        outcomes = await pipeline.ingest(
            [document.to_domain(project) for document in documents], expected_versions=expected
        )
    except InvalidInputError as error:
        raise located(error, documents, batch=batch) from None
    for outcome in outcomes:
        record_ingested(status=outcome.status, chunks=outcome.chunk_count if outcome.status != "unchanged" else 0)
    answer = IngestResponse(
        project=project,
        documents=[
            IngestOutcomeOut(
                id=outcome.document_id,
                status=outcome.status,
                chunks=outcome.chunk_count,
                embedded=outcome.embedded_count,
                version=outcome.version,
            )
            for outcome in outcomes
        ],
    )
    # A 201 without `Location` says the target, the collection, is what it created (RFC 9110 15.3.2).
    where = {} if batch else _written_document_headers(project, outcomes[0])
    return Response(answer, status_code=written_status(outcomes), headers=where)


def _written_document_headers(project: str, outcome: IngestOutcome) -> dict[str, str]:
    """`Location` of the one document a write names, and the `ETag` a `GET` of it would give now.

    RFC 9110 15.3.2: validators on a 201 are those of the representation the request created, here the
    document at `Location`; a 200 names the same. A caller updating next sends it back as `If-Match`
    without a `GET` first. Pending until the lexical index has the version, as `GET`'s is.
    """
    return {
        LOCATION_HEADER.name: document_path(project, outcome.document_id),
        ETAG_HEADER.name: entity_tag(outcome.version, lexically_indexed=outcome.lexically_indexed),
    }


def written_status(outcomes: Sequence[IngestOutcome]) -> int:
    """201 when the write created a document; 200 when it only replaced some or found them unchanged.

    RFC 9110 15.3.2: 201 says the request created a resource. Re-sending a document (a retry, a sync that
    sends everything) created nothing, and a client counting what it created read every retry as a creation.
    """
    return HTTP_201_CREATED if any(outcome.status == "created" for outcome in outcomes) else HTTP_200_OK


def document_path(project: str, document_id: str) -> str:
    """The path of a document's URL: its id's UTF-8 percent-encoded, `/` kept (the route reads it back as one)."""
    collection = DocumentController.path.replace("{project:str}", quote(project, safe=""))
    return f"{collection}/{quote(document_id, safe='/')}"
