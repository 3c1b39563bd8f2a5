"""Search endpoints: `GET /memory/query` (the reference endpoint) and `POST /v1/search` (every option)."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Controller, Request, get, post
from litestar.datastructures import State
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import JSONBody, QueryParameter
from litestar.status_codes import HTTP_200_OK

from app.api.dependencies import Injected
from app.api.errors import PROBLEM_MEDIA_TYPE, ProblemOut
from app.api.guards import authorize_project, principal_of, search_guard
from app.api.search_schemas import SearchRequest, SearchResponse, search_response
from app.auth.tokens import ANONYMOUS, SCOPE_SEARCH, Principal, cache_scope
from app.domain.errors import InvalidQueryError
from app.domain.models import FusionMethod, SearchStrategy
from app.query.planner import MAX_QUERY_CHARS, SearchOptions
from app.search.rollout import caller_key
from app.search.service import SearchCall, SearchService

SEARCH_ERROR_RESPONSES = {
    400: ResponseSpec(
        data_container=ProblemOut,
        media_type=PROBLEM_MEDIA_TYPE,
        description="Invalid input; `field` names the offending parameter",
    ),
    503: ResponseSpec(
        data_container=ProblemOut,
        media_type=PROBLEM_MEDIA_TYPE,
        description="Every search engine failed; `reasons` says why each leg failed",
    ),
}


def _search_call(
    request: Request[Any, Any, State], principal: Principal, *, query: str, options: SearchOptions
) -> SearchCall:
    client = request.client
    return SearchCall(
        query=query,
        options=options,
        auth_scope=cache_scope(principal),
        # With auth off everyone is ANONYMOUS: its subject would put every caller on one rollout arm.
        caller_key=caller_key(
            None if principal is ANONYMOUS else principal.subject,
            request.headers.get("x-client-id"),
            client.host if client else None,
        ),
        scopes=tuple(sorted(principal.scopes)),
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
            QueryParameter(name="query", description=f"What to search for (1-{MAX_QUERY_CHARS} characters)"),
        ] = None,
        project: Annotated[str | None, QueryParameter(description="Project id [A-Za-z0-9._-]{1,64}")] = None,
        limit: Annotated[int | None, QueryParameter(ge=1, le=100, description="Results to return (1-100)")] = None,
        strategy: Annotated[str | None, QueryParameter(description="hybrid | semantic | lexical | cascading")] = None,
        fusion: Annotated[str | None, QueryParameter(description="rrf | weighted | zscore")] = None,
        explain: Annotated[bool, QueryParameter(description="Include the optimizer's analysis")] = False,  # noqa: FBT002
    ) -> SearchResponse:
        """Search with the service defaults; the response follows the reference Part 4 shape."""
        if query_text is None:
            msg = "query is required"
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
        call = _search_call(request, principal_of(request), query=query_text, options=options)
        return search_response(query_text, await search_service.search(call), explain=explain)

    @post(
        "/v1/search",
        summary="Search a project with filters and fusion options",
        status_code=HTTP_200_OK,
        responses=SEARCH_ERROR_RESPONSES,
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
        call = _search_call(request, principal, query=data.query, options=options)
        return search_response(data.query, await search_service.search(call), explain=data.explain)
