"""Search endpoints: `GET /memory/query` (reference), `POST /v1/search` (every option), `POST /v1/search/batch`.

Paging (both single-search endpoints and each query of a batch): `offset` or `cursor` asks for one page of
a ranking `PAGE_DEPTH` deep. The cursor carries the next offset, the project generation the ranking was
made at, the moment relative dates were resolved against, and a fingerprint of the query, its options and
its `as_of` (a cursor replayed with another query or another `as_of` is a 400).
"""

from __future__ import annotations

import hashlib
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any, Final

from litestar import Controller, Request, get, post
from litestar.datastructures import State
from litestar.params import JSONBody, QueryParameter
from litestar.status_codes import HTTP_200_OK

from app.api.cursors import decode_cursor, encode_cursor
from app.api.dependencies import Injected
from app.api.errors import problem_responses
from app.api.guards import authorize_project, principal_of, request_caller_key, search_guard
from app.api.search_requests import (
    FUSION_DESCRIPTION,
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
from app.domain.moments import as_utc
from app.domain.project_ids import PROJECT_ID_PATTERN, PROJECT_ID_RULE
from app.query.planner import MAX_QUERY_CHARS, SearchOptions, unused_options
from app.search.calls import SearchCall, SearchOutcome
from app.search.paging import PAGE_DEPTH, SearchPage
from app.search.service import SearchService

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

# The HTTP server refuses a request line past about 64 KiB with a bare text/plain 400, before the app sees it;
# 4,000 characters stay under it even when every one is percent-encoded UTF-8 (up to 12 bytes each).
GET_QUERY_MAX_CHARS: Final = 4000
SEARCH_CURSOR = "search"
# The options' names as a search body spells them, so that a 400's `field` names what the caller sent.
_BODY_FIELDS: Final[Mapping[str, str]] = {
    "semantic_weight": "weights.semantic",
    "lexical_weight": "weights.lexical",
    "levels": "filters.level",
    "tags": "filters.tags",
    "source_prefix": "filters.source_prefix",
    "date_from": "filters.date_from",
    "date_to": "filters.date_to",
    "max_chunks_per_document": "collapse",
    "fusion_method": "fusion",
}

SEARCH_ERROR_RESPONSES = problem_responses(400, 401, 403, 503, 504)
SEARCH_BODY_ERROR_RESPONSES = problem_responses(400, 401, 403, 413, 503, 504)


@dataclass(frozen=True, slots=True)
class _Paging:
    """What a search request asks of paging: its page (None: unpaged) and the clock its relative dates use.

    `as_of` is the request's own (None: not given); `clock` is what the search resolves "last week" against.
    """

    page: SearchPage | None
    as_of: datetime | None
    clock: datetime | None


def _fingerprint(query: str, options: SearchOptions, as_of: datetime | None) -> str:
    """What a cursor is bound to: the query, every option but the page size, and the request's `as_of`.

    `as_of` counts with its offset: 02:00+02:00 and 00:00Z are one instant but not one "today" (relative
    dates are read in the offset's days). Absent, the text is what it was before `as_of` existed, so a
    cursor minted by an older replica during a rolling update stays valid (and one minted with a UTC
    `as_of` too: both spell it `+00:00`).
    """
    text = f"{query}\x1f{replace(options, limit=None)!r}"
    if as_of is not None:
        text += f"\x1fas_of={as_of.isoformat()}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _cursor_clock(values: dict[str, Any]) -> datetime | None:
    """The moment a cursor's first page resolved relative dates against (None: a cursor minted without one)."""
    text = values.get("t")
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text) if isinstance(text, str) else None
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:
        msg = "cursor is not a cursor this endpoint returned"
        raise InvalidQueryError(msg, field="cursor")
    return moment


def _paging(
    query: str, options: SearchOptions, *, as_of: datetime | None, offset: int | None, cursor: str | None
) -> _Paging:
    """The page asked for and its clock; a cursor of another query or `as_of`, or a foreign cursor, is a 400.

    A paged search fixes its clock here rather than leaving it to the optimizer, and its cursor carries it:
    every later page then resolves "last week" against the first page's moment, even across midnight or a
    week's end, so its date filter, and with it the ranking (and cache entry) it is cut from, is the first
    page's. A cursor therefore never mixes two weeks. The request's own `as_of` is in the fingerprint instead:
    another `as_of` is another question, refused like another query.
    """
    if cursor is None:
        if offset is None:
            return _Paging(page=None, as_of=as_of, clock=as_of)
        return _Paging(page=SearchPage(offset=offset), as_of=as_of, clock=as_of or datetime.now(UTC))
    if offset is not None:
        msg = "give offset or cursor, not both"
        raise InvalidQueryError(msg, field="offset")
    values = decode_cursor(cursor, kind=SEARCH_CURSOR)
    start, generation = values.get("o"), values.get("g")
    if values.get("f") != _fingerprint(query, options, as_of):
        msg = "cursor belongs to another query, other options or another as_of"
        raise InvalidQueryError(msg, field="cursor")
    # A bool is an int to isinstance: `"o": true` was taken for offset 1 and echoed as `"offset": true`.
    if (
        not isinstance(start, int)
        or isinstance(start, bool)
        or not 0 <= start < PAGE_DEPTH
        or not isinstance(generation, int | None)
        or isinstance(generation, bool)
    ):
        msg = "cursor is not a cursor this endpoint returned"
        raise InvalidQueryError(msg, field="cursor")
    clock = as_of or _cursor_clock(values) or datetime.now(UTC)
    page = SearchPage(offset=start, generation=generation, speakers=_cursor_speakers(values))
    return _Paging(page=page, as_of=as_of, clock=clock)


def _cursor_speakers(values: dict[str, Any]) -> frozenset[str] | None:
    """The query's names its first page read as the project's speakers (None: a cursor minted without them)."""
    names = values.get("s")
    if names is None:
        return None
    if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
        msg = "cursor is not a cursor this endpoint returned"
        raise InvalidQueryError(msg, field="cursor")
    return frozenset(names)


def _respond(
    query: str, options: SearchOptions, paging: _Paging, outcome: SearchOutcome, *, explain: bool
) -> SearchResponse:
    following = None
    if outcome.next_offset is not None:
        values: dict[str, Any] = {
            "o": outcome.next_offset,
            "g": outcome.generation,
            "f": _fingerprint(query, options, paging.as_of),
            "s": sorted(outcome.speakers),  # every page plans as the first did, on whichever replica
        }
        if paging.clock is not None:
            values["t"] = as_utc(paging.clock).isoformat()
        following = encode_cursor(SEARCH_CURSOR, values)
    unused = tuple(_BODY_FIELDS.get(name, name) for name in unused_options(options, outcome.plan))
    return search_response(query, outcome, explain=explain, next_cursor=following, unused_options=unused)


@contextmanager
def _body_fields() -> Iterator[None]:
    """The service's option errors named as the request spells the field: `weights.semantic`, `queries[1].fusion`.

    The service validates the options (once, for every caller); only the names are the API's (the query
    string of `GET /memory/query` spells its `fusion` as a body does).
    """
    try:
        yield
    except InvalidQueryError as error:
        prefix, dot, name = (error.field or "").rpartition(".")
        if name not in _BODY_FIELDS:
            raise
        raise InvalidQueryError(error.message, field=f"{prefix}{dot}{_BODY_FIELDS[name]}") from None


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
    paging: _Paging,
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
                    " server's. RFC 3339 with an offset or Z (2024-05-08T12:00:00Z); no offset: a 400"
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
        paging = _paging(query_text, options, as_of=moment, offset=offset, cursor=cursor)
        call = _search_call(request, principal_of(request), query=query_text, options=options, paging=paging)
        with _body_fields():
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
        paging = _paging(data.query, options, as_of=data.as_of, offset=data.offset, cursor=data.cursor)
        call = _search_call(request, principal, query=data.query, options=options, paging=paging)
        with _body_fields():
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
        """
        principal = authorize_project(request, data.project, scope=SCOPE_SEARCH)
        if len(data.queries) > settings.search_batch_max_queries:
            msg = f"{len(data.queries)} queries in one batch; at most {settings.search_batch_max_queries}"
            raise InvalidQueryError(msg, field="queries")
        calls, options, pagings = [], [], []
        for index, query in enumerate(data.queries):
            query_options = _options(data.project, query)
            try:
                paging = _paging(
                    query.query, query_options, as_of=query.as_of, offset=query.offset, cursor=query.cursor
                )
            except InvalidInputError as error:
                raise InvalidQueryError(error.message, field=f"queries[{index}].{error.field}") from None
            options.append(query_options)
            pagings.append(paging)
            calls.append(_search_call(request, principal, query=query.query, options=query_options, paging=paging))
        with _body_fields():
            outcomes = await search_service.search_batch(calls)
        return BatchSearchResponse(
            results=[
                _respond(query.query, query_options, paging, outcome, explain=query.explain)
                for query, query_options, paging, outcome in zip(data.queries, options, pagings, outcomes, strict=True)
            ]
        )
