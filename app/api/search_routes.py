"""Search endpoints: `GET /memory/query` (reference), `POST /v1/search` (every option), `POST /v1/search/batch`.

Paging (both single-search endpoints and each query of a batch): `offset` or `cursor` asks for one page of
a ranking `PAGE_DEPTH` deep (`app/api/search_cursors.py`).
"""

from __future__ import annotations

from typing import Annotated, Any, Final

from litestar import Controller, Request, get, post
from litestar.datastructures import State
from litestar.params import JSONBody, QueryParameter
from litestar.status_codes import HTTP_200_OK

from app.api.dependencies import Injected
from app.api.errors import problem_responses
from app.api.guards import authorize_project, principal_of, request_caller_key, search_guard
from app.api.search_admission import admit_searches
from app.api.search_cursors import SearchPaging, next_cursor, search_paging
from app.api.search_requests import (
    FUSION_DESCRIPTION,
    TRUNCATED_TIME_RULE,
    BatchSearchRequest,
    SearchFields,
    SearchRequest,
    as_of_from_text,
)
from app.api.search_schemas import BatchSearchResponse, SearchResponse, search_response
from app.api.strict_bodies import unknown_choice
from app.auth.tokens import SCOPE_SEARCH, Principal, cache_scope
from app.config import Settings
from app.domain.errors import InvalidInputError, InvalidQueryError
from app.domain.models import FusionMethod, SearchStrategy
from app.domain.project_ids import PROJECT_ID_PATTERN, PROJECT_ID_RULE
from app.query.planner import SearchOptions, unused_options
from app.query.validation import MAX_QUERY_CHARS, REQUEST_NAMES
from app.search.calls import SearchCall, SearchOutcome
from app.search.paging import PAGE_DEPTH
from app.search.service import SearchService

# The HTTP server refuses a request line past about 64 KiB with a bare text/plain 400, before the app sees it;
# 4,000 characters stay under it even when every one is percent-encoded UTF-8 (up to 12 bytes each).
GET_QUERY_MAX_CHARS: Final = 4000
SEARCH_ERROR_RESPONSES = problem_responses(400, 401, 403, 503, 504)
SEARCH_BODY_ERROR_RESPONSES = problem_responses(400, 401, 403, 413, 415, 503, 504)


def _respond(
    query: str, options: SearchOptions, paging: SearchPaging, outcome: SearchOutcome, *, explain: bool
) -> SearchResponse:
    following = next_cursor(query, options, paging, outcome)
    unused = tuple(REQUEST_NAMES.get(name, name) for name in unused_options(options, outcome.plan))
    return search_response(query, outcome, explain=explain, next_cursor=following, unused_options=unused)


def _options(project: str, data: SearchFields) -> SearchOptions:
    filters = data.filters
    levels: tuple[str, ...] = ()
    if filters is not None and filters.level is not None:
        levels = (filters.level,) if isinstance(filters.level, str) else tuple(filters.level)
    return SearchOptions(
        project=project,
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


def _search_call(
    request: Request[Any, Any, State],
    principal: Principal,
    *,
    query: str,
    options: SearchOptions,
    paging: SearchPaging,
) -> SearchCall:
    return SearchCall(
        query=query,
        options=options,
        page=paging.page,
        as_of=paging.clock,
        auth_scope=cache_scope(principal),
        caller_key=request_caller_key(request, principal),
        scopes=tuple(sorted(principal.scopes)),
    )


def _enum(value: str | None, enum_type: type[SearchStrategy | FusionMethod], field: str) -> Any:  # noqa: ANN401 - one of two enums
    """The member spelt exactly `value`, as a body's `Literal` takes it: `HYBRID`, ` hybrid` or "" is a 400.

    Lowercasing and stripping here made `?strategy=HYBRID` search where `"strategy": "HYBRID"` was
    refused; the refusal is worded as the body's (`unknown_choice`).
    """
    if value is None:
        return None
    try:
        return enum_type(value)
    except ValueError:
        raise unknown_choice(field, repr(value), [member.value for member in enum_type]) from None


class SearchController(Controller):
    """`GET /memory/query` (reference endpoint) and `POST /v1/search` (full options)."""

    tags = ["search"]  # noqa: RUF012 - Litestar reads it as a class attribute

    @get(
        "/memory/query",
        summary="Search a project (reference endpoint)",
        responses=SEARCH_ERROR_RESPONSES,
        guards=[search_guard],
    )
    async def memory_query(  # noqa: PLR0913, PLR0917 - one parameter per query-string field
        self,
        request: Request[Any, Any, State],
        search_service: Injected[SearchService],
        query_text: Annotated[
            str | None,
            QueryParameter(
                name="query",
                description=(
                    f"What to search for: 1 to {GET_QUERY_MAX_CHARS} characters here (a URL carries no more);"
                    f" longer texts, up to QUERY_MAX_CHARS (at most {MAX_QUERY_CHARS}), through POST /v1/search"
                ),
                required=True,
                schema_extra={"min_length": 1, "max_length": GET_QUERY_MAX_CHARS},
            ),
        ] = None,
        project: Annotated[
            str | None,
            QueryParameter(
                description=f"Project id: {PROJECT_ID_RULE}",
                required=True,
                schema_extra={"pattern": PROJECT_ID_PATTERN},
            ),
        ] = None,
        limit: Annotated[int | None, QueryParameter(ge=1, le=100, description="Results to return (1-100)")] = None,
        strategy: Annotated[
            str | None,
            QueryParameter(
                description="hybrid | semantic | lexical | cascading",
                schema_extra={"enum": [member.value for member in SearchStrategy]},
            ),
        ] = None,
        fusion: Annotated[
            str | None,
            QueryParameter(
                description=f"rrf | weighted | zscore. {FUSION_DESCRIPTION}",
                schema_extra={"enum": [member.value for member in FusionMethod]},
            ),
        ] = None,
        explain: Annotated[bool, QueryParameter(description="Include the optimizer's analysis")] = False,  # noqa: FBT002
        offset: Annotated[
            int | None, QueryParameter(ge=0, lt=PAGE_DEPTH, description="Page from this 0-based rank on")
        ] = None,
        cursor: Annotated[str | None, QueryParameter(description="`next_cursor` of the previous page")] = None,
        as_of: Annotated[
            str | None,
            QueryParameter(
                description=(
                    '"Now" for relative dates in the query ("last week"): a memory\'s own clock; absent, the'
                    " server's. RFC 3339 with an offset or Z (2024-05-08T12:00:00Z); no offset: a 400;"
                    f" {TRUNCATED_TIME_RULE}"
                ),
                schema_extra={"format": "date-time"},
            ),
        ] = None,
    ) -> SearchResponse:
        """Search with the service defaults; the response follows the reference Part 4 shape."""
        if query_text is None:
            msg = "query is required"
            raise InvalidQueryError(msg, field="query")
        if len(query_text) > GET_QUERY_MAX_CHARS:
            msg = f"query is longer than {GET_QUERY_MAX_CHARS} characters: send it with POST /v1/search"
            raise InvalidQueryError(msg, field="query")
        if project is None:  # the guard validated and authorized a project that was given
            msg = "project is required"
            raise InvalidQueryError(msg, field="project")
        options = SearchOptions(
            project=project,
            limit=limit,
            strategy=_enum(strategy, SearchStrategy, "strategy"),
            fusion_method=_enum(fusion, FusionMethod, "fusion"),
        )
        moment = None if as_of is None else as_of_from_text(as_of)
        paging = search_paging(query_text, options, as_of=moment, offset=offset, cursor=cursor)
        call = _search_call(request, principal_of(request), query=query_text, options=options, paging=paging)
        async with admit_searches(request.app.state, [call]):
            outcome = await search_service.search(call)
            return _respond(query_text, options, paging, outcome, explain=explain)

    @post(
        "/v1/search",
        summary="Search a project with filters and fusion options",
        status_code=HTTP_200_OK,
        responses=SEARCH_BODY_ERROR_RESPONSES,
        guards=[search_guard],
    )
    async def search(
        self,
        request: Request[Any, Any, State],
        search_service: Injected[SearchService],
        data: JSONBody[SearchRequest],
    ) -> SearchResponse:
        """Search with explicit filters, strategy, fusion, weights, collapse and min_score."""
        principal = authorize_project(request, data.project, scope=SCOPE_SEARCH)
        options = _options(data.project, data)
        paging = search_paging(data.query, options, as_of=data.as_of, offset=data.offset, cursor=data.cursor)
        call = _search_call(request, principal, query=data.query, options=options, paging=paging)
        async with admit_searches(request.app.state, [call]):
            outcome = await search_service.search(call)
            return _respond(data.query, options, paging, outcome, explain=data.explain)

    @post(
        "/v1/search/batch",
        summary="Several searches of one project in one request",
        status_code=HTTP_200_OK,
        responses=SEARCH_BODY_ERROR_RESPONSES,
        guards=[search_guard],
    )
    async def search_batch(
        self,
        request: Request[Any, Any, State],
        search_service: Injected[SearchService],
        settings: Injected[Settings],
        data: JSONBody[BatchSearchRequest],
    ) -> BatchSearchResponse:
        """One search response per query, in order; the query embeddings are computed in one batch.

        At most `SEARCH_BATCH_MAX_QUERIES` queries (a 400 naming `queries` beyond). Each query takes the
        fields of `POST /v1/search` but `project`; an invalid one fails the batch with a 400 naming it.
        While other searches hold the process's search memory, a batch waits for room; it is not refused for it.
        """
        principal = authorize_project(request, data.project, scope=SCOPE_SEARCH)
        if len(data.queries) > settings.search_batch_max_queries:
            msg = f"{len(data.queries)} queries in one batch; at most {settings.search_batch_max_queries}"
            raise InvalidQueryError(msg, field="queries")
        calls, options, pagings = [], [], []
        for index, query in enumerate(data.queries):
            query_options = _options(data.project, query)
            try:
                paging = search_paging(
                    query.query, query_options, as_of=query.as_of, offset=query.offset, cursor=query.cursor
                )
            except InvalidInputError as error:
                raise error.of_item(index, list_field="queries") from None
            options.append(query_options)
            pagings.append(paging)
            calls.append(_search_call(request, principal, query=query.query, options=query_options, paging=paging))
        async with admit_searches(request.app.state, calls):
            outcomes = await search_service.search_batch(calls)
            return BatchSearchResponse(
                results=[
                    _respond(query.query, query_options, paging, outcome, explain=query.explain)
                    for query, query_options, paging, outcome in zip(
                        data.queries, options, pagings, outcomes, strict=True
                    )
                ]
            )
