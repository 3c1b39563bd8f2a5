"""HTTP handlers: thin, they check the caller, translate wire shapes and call the services."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Annotated, Any

import msgspec
from litestar import Controller, Request, Response, delete, get, post
from litestar.datastructures import State
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import Parameter
from litestar.status_codes import HTTP_200_OK, HTTP_201_CREATED, HTTP_503_SERVICE_UNAVAILABLE

from app.api.auth import ANONYMOUS, Principal, TokenVerifier, authorize, authorize_scope, cache_scope
from app.api.schemas import (
    DocumentBatchIn,
    DocumentIn,
    DocumentOut,
    IngestOutcomeOut,
    IngestResponse,
    ProblemOut,
    SearchRequest,
    SearchResponse,
    document_out,
)
from app.api.search_service import SearchCall, SearchService
from app.config import PROJECT_ID_PATTERN, Settings
from app.domain.errors import (
    DocumentNotFoundError,
    DocumentTooLargeError,
    EngineError,
    InvalidInputError,
    InvalidQueryError,
)
from app.domain.models import FusionMethod, SearchStrategy
from app.engines.opensearch import forwarded_token
from app.observability import record_ingested
from app.operations.rollout import caller_key
from app.query.planner import SearchOptions

SCOPE_SEARCH = "search"
SCOPE_INGEST = "ingest"
SCOPE_ADMIN = "admin"
READINESS_CACHE_S = 1.0
PING_TIMEOUT_S = 2.0

_PROBLEM_MEDIA_TYPE = "application/problem+json"
SEARCH_ERROR_RESPONSES = {
    400: ResponseSpec(
        data_container=ProblemOut,
        media_type=_PROBLEM_MEDIA_TYPE,
        description="Invalid input; `field` names the offending parameter",
    ),
    503: ResponseSpec(
        data_container=ProblemOut,
        media_type=_PROBLEM_MEDIA_TYPE,
        description="Every search engine failed; `reasons` says why each leg failed",
    ),
}

ProjectParameter = Annotated[str, Parameter(pattern=PROJECT_ID_PATTERN, description="Project id")]


def _principal(request: Request[Any, Any, State], *, project: str | None, scope: str) -> Principal:
    verifier: TokenVerifier = request.app.state.verifier
    principal = verifier.verify(request.headers.get("authorization"))
    if project is not None:
        authorize(principal, project=project, scope=scope)
    else:
        authorize_scope(principal, scope=scope)
    if request.app.state.settings.opensearch_auth == "forward_jwt":
        forwarded_token.set(principal.token)
    return principal


def _search_call(
    request: Request[Any, Any, State], principal: Principal, *, query: str, options: SearchOptions, explain: bool
) -> SearchCall:
    client = request.client
    return SearchCall(
        query=query,
        options=options,
        explain=explain,
        auth_scope=cache_scope(principal),
        # With auth off everyone is ANONYMOUS: its subject would put every caller on one rollout arm.
        caller_key=caller_key(
            None if principal is ANONYMOUS else principal.subject,
            request.headers.get("x-client-id"),
            client.host if client else None,
        ),
    )


def _enum(value: str | None, enum_type: type[SearchStrategy | FusionMethod], field: str) -> Any:  # noqa: ANN401 - one of two enums
    if value is None or not value.strip():
        return None
    try:
        return enum_type(value.strip().lower())
    except ValueError:
        allowed = ", ".join(member.value for member in enum_type)
        msg = f"unknown {field} {value!r}; expected one of {allowed}"
        raise InvalidQueryError(msg, field=field) from None


def _check_project(project: str | None) -> str:
    if not project:
        msg = "project is required"
        raise InvalidQueryError(msg, field="project")
    try:
        msgspec.convert(project, Annotated[str, msgspec.Meta(pattern=PROJECT_ID_PATTERN)])
    except msgspec.ValidationError:
        msg = "project must match [A-Za-z0-9._-]{1,64}"
        raise InvalidQueryError(msg, field="project") from None
    return project


class SearchController(Controller):
    """`GET /memory/query` (reference endpoint) and `POST /v1/search` (full options)."""

    tags = ["search"]  # noqa: RUF012 - Litestar reads it as a class attribute

    @get("/memory/query", summary="Search a project (reference endpoint)", responses=SEARCH_ERROR_RESPONSES)
    async def memory_query(  # noqa: PLR0913, PLR0917 - one parameter per query-string field
        self,
        request: Request[Any, Any, State],
        search_service: SearchService,
        query_text: Annotated[
            str | None, Parameter(query="query", description="What to search for (1-2000 characters)")
        ] = None,
        project: Annotated[str | None, Parameter(description="Project id [A-Za-z0-9._-]{1,64}")] = None,
        limit: Annotated[int | None, Parameter(ge=1, le=100, description="Results to return (1-100)")] = None,
        strategy: Annotated[str | None, Parameter(description="hybrid | semantic | lexical | cascading")] = None,
        fusion: Annotated[str | None, Parameter(description="rrf | weighted | zscore")] = None,
        explain: Annotated[bool, Parameter(description="Include the optimizer's analysis")] = False,  # noqa: FBT002
    ) -> SearchResponse:
        """Search with the service defaults; the response follows the reference Part 4 shape."""
        if query_text is None:
            msg = "query is required"
            raise InvalidQueryError(msg, field="query")
        project_id = _check_project(project)
        principal = _principal(request, project=project_id, scope=SCOPE_SEARCH)
        options = SearchOptions(
            project=project_id,
            limit=limit,
            strategy=_enum(strategy, SearchStrategy, "strategy"),
            fusion_method=_enum(fusion, FusionMethod, "fusion"),
        )
        call = _search_call(request, principal, query=query_text, options=options, explain=explain)
        return await search_service.search(call)

    @post(
        "/v1/search",
        summary="Search a project with filters and fusion options",
        status_code=HTTP_200_OK,
        responses=SEARCH_ERROR_RESPONSES,
    )
    async def search(
        self, request: Request[Any, Any, State], search_service: SearchService, data: SearchRequest
    ) -> SearchResponse:
        """Search with explicit filters, strategy, fusion, weights, collapse and min_score."""
        principal = _principal(request, project=data.project, scope=SCOPE_SEARCH)
        filters = data.filters
        levels: tuple[str, ...] = ()
        if filters is not None and filters.level is not None:
            levels = (filters.level,) if isinstance(filters.level, str) else tuple(filters.level)
        options = SearchOptions(
            project=data.project,
            limit=data.limit,
            strategy=SearchStrategy(data.strategy) if data.strategy else None,
            fusion_method=FusionMethod(data.fusion) if data.fusion else None,
            semantic_weight=data.weights.semantic if data.weights else None,
            lexical_weight=data.weights.lexical if data.weights else None,
            rrf_k=data.rrf_k,
            levels=levels,
            tags=tuple(filters.tags) if filters else (),
            source_prefix=filters.source_prefix if filters else None,
            date_from=filters.date_from if filters else None,
            date_to=filters.date_to if filters else None,
            collapse=True if data.collapse is not None else None,
            max_chunks_per_document=data.collapse,
            min_score=data.min_score,
        )
        call = _search_call(request, principal, query=data.query, options=options, explain=data.explain)
        return await search_service.search(call)


def _decode_documents(body: bytes, *, max_document_bytes: int) -> list[DocumentIn]:
    try:
        raw = msgspec.json.decode(body)
    except msgspec.DecodeError as error:
        msg = f"malformed JSON: {error}"
        raise InvalidInputError(msg, field="body") from None
    if not isinstance(raw, dict):
        msg = 'expected a JSON object: one document, or {"documents": [...]}'
        raise InvalidInputError(msg, field="body")
    try:
        if "documents" in raw:
            documents = msgspec.convert(raw, DocumentBatchIn).documents
        else:
            documents = [msgspec.convert(raw, DocumentIn)]
    except msgspec.ValidationError as error:
        raise InvalidInputError(str(error), field=_field_of(str(error))) from None
    for document in documents:
        if document.text is None and document.markdown is None:
            msg = f"document {document.id!r} has no text"
            raise InvalidInputError(msg, field="text")
        size = len(document.body().encode())
        if size > max_document_bytes:
            msg = f"document {document.id!r} is {size} bytes; the limit is {max_document_bytes}"
            raise DocumentTooLargeError(msg, field="text")
    return documents


def _field_of(message: str) -> str | None:
    # msgspec says "... - at `$.documents[0].id`": report the path without the `$.` root.
    marker = "at `$."
    if marker in message:
        return message.split(marker, 1)[1].rstrip("`")
    if "missing required field `" in message:
        return message.split("missing required field `", 1)[1].split("`", 1)[0]
    return None


class DocumentController(Controller):
    """Ingestion: write, read and delete a project's documents. PostgreSQL has it when we answer."""

    path = "/v1/projects/{project:str}/documents"
    tags = ["documents"]  # noqa: RUF012 - Litestar reads it as a class attribute

    @post("/", summary="Ingest one document or a batch", status_code=HTTP_201_CREATED)
    async def ingest(self, request: Request[Any, Any, State], project: str) -> IngestResponse:
        """Body: one document `{id, text|markdown, source, title, tags, event_time, metadata}`, or `{documents}`."""
        _check_project(project)
        _principal(request, project=project, scope=SCOPE_INGEST)
        settings: Settings = request.app.state.settings
        documents = _decode_documents(await request.body(), max_document_bytes=settings.max_document_bytes)
        if len(documents) > settings.max_batch_documents:
            msg = f"{len(documents)} documents in one request; at most {settings.max_batch_documents}"
            raise InvalidInputError(msg, field="documents")
        outcomes = await request.app.state.pipeline.ingest([document.to_domain(project) for document in documents])
        for outcome in outcomes:
            record_ingested(status=outcome.status, chunks=outcome.chunk_count if outcome.status != "unchanged" else 0)
        return IngestResponse(
            project=project,
            documents=[
                IngestOutcomeOut(
                    id=outcome.document_id,
                    status=outcome.status,
                    chunks=outcome.chunk_count,
                    embedded=outcome.embedded_count,
                )
                for outcome in outcomes
            ],
        )

    @get("/{document_id:path}", summary="A stored document with its chunks")
    async def read(self, request: Request[Any, Any, State], project: str, document_id: str) -> DocumentOut:
        """The document as PostgreSQL holds it, chunks in order with breadcrumbs. Ids may contain `/`."""
        _check_project(project)
        document_id = document_id.removeprefix("/")
        _principal(request, project=project, scope=SCOPE_SEARCH)
        document = await request.app.state.engines.store.get_document(project, document_id)
        if document is None:
            msg = f"no document {document_id!r} in project {project!r}"
            raise DocumentNotFoundError(msg)
        return document_out(document)

    @delete("/{document_id:path}", summary="Delete a document and its chunks")
    async def remove(self, request: Request[Any, Any, State], project: str, document_id: str) -> None:
        """Delete from PostgreSQL now; the lexical index follows through the outbox."""
        _check_project(project)
        document_id = document_id.removeprefix("/")
        _principal(request, project=project, scope=SCOPE_INGEST)
        if not await request.app.state.pipeline.delete(project, document_id):
            msg = f"no document {document_id!r} in project {project!r}"
            raise DocumentNotFoundError(msg)
        record_ingested(status="deleted")


class AdminController(Controller):
    """Operator endpoints."""

    tags = ["admin"]  # noqa: RUF012 - Litestar reads it as a class attribute

    @get("/admin/flags", summary="Effective flags and where each value came from")
    async def flags(self, request: Request[Any, Any, State]) -> dict[str, Any]:
        """The live flags (env defaults overridden by the flags file), their sources and the file's state."""
        _principal(request, project=None, scope=SCOPE_ADMIN)
        description: dict[str, Any] = request.app.state.flags.describe()
        return description

    @post("/v1/projects/{project:str}/reindex", summary="Rebuild a project's lexical index", status_code=HTTP_200_OK)
    async def reindex(self, request: Request[Any, Any, State], project: str) -> dict[str, Any]:
        """Queue every document of the project for lexical indexing from PostgreSQL."""
        _check_project(project)
        _principal(request, project=project, scope=SCOPE_ADMIN)
        engines = request.app.state.engines
        await engines.lexical.delete_project(project)
        queued = await engines.store.queue_project_for_reindex(project)
        request.app.state.outbox.wake()
        return {"project": project, "queued_documents": queued}


class HealthController(Controller):
    """Split probes: liveness never touches an engine; readiness checks them all."""

    tags = ["health"]  # noqa: RUF012 - Litestar reads it as a class attribute

    @get("/healthz", summary="Liveness: the process answers")
    async def live(self) -> dict[str, str]:
        """Always ok while the process serves."""
        return {"status": "ok"}

    @get("/readyz", summary="Readiness: both stores reachable and the model loaded")
    async def ready(self, request: Request[Any, Any, State]) -> Response[dict[str, Any]]:
        """503 while a required engine is down; the answer is cached for a second."""
        state = request.app.state
        now = time.monotonic()
        cached = state.get("readiness")
        if cached is not None and now - cached[0] < READINESS_CACHE_S:
            body = cached[1]
        else:
            body = await _readiness(state)
            state.readiness = (now, body)
        status = HTTP_200_OK if body["status"] == "ready" else HTTP_503_SERVICE_UNAVAILABLE
        return Response(body, status_code=status)


async def _readiness(state: State) -> dict[str, Any]:
    import asyncio  # noqa: PLC0415 - only readiness needs timeouts here

    engines = getattr(state, "engines", None)
    if engines is None:
        return {"status": "starting", "checks": {}}
    checks: dict[str, str] = {"model": "ok" if engines.embedder.dimensions > 0 else "not loaded"}
    probes = (("vector", engines.vector.ping), ("store", engines.store.ping), ("lexical", engines.lexical.ping))
    for label, ping in probes:
        try:
            async with asyncio.timeout(PING_TIMEOUT_S):
                await ping()
            checks[label] = "ok"
        except (EngineError, TimeoutError) as error:
            checks[label] = f"down: {type(error).__name__}"
    ready = all(value == "ok" for value in checks.values())
    return {"status": "ready" if ready else "not ready", "checks": checks, "checked_at": datetime.now(UTC).isoformat()}
