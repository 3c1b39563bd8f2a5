"""Every operation of the Poimen Memory Search API, defined once for both clients.

Each function below builds one endpoint's `Call` from the caller's arguments; `@endpoint` binds it to
its method, path template and response type. `PoimenClient` and `AsyncPoimenClient` inherit the class,
so `client.search(...)` has this signature and docstring on both (async: awaitable).
"""

from __future__ import annotations

from collections.abc import Sequence  # noqa: TC003 - the client methods' signatures are read at runtime
from datetime import UTC
from typing import Any, Final, Literal

import msgspec

from poimen_client.calls import Call, endpoint
from poimen_client.models import (
    BatchSearchResponse,
    Deleted,
    Document,
    DocumentFilter,
    DocumentPage,
    IngestResponse,
    Liveness,
    ProjectPage,
    ProjectStats,
    Readiness,
    Reindexed,
    SearchQuery,
    SearchResponse,
    StoredDocument,
)
from poimen_client.project_ids import checked_project_id
from poimen_client.sendable import checked_struct, checked_text

MEMORY_QUERY_FIELDS: Final = frozenset({"query", "limit", "strategy", "fusion", "explain", "offset", "cursor", "as_of"})
"""The `SearchQuery` fields `GET /memory/query` takes; the others need `search()`."""


def _search_query(query: object, *, path: str = "") -> SearchQuery:  # object: untyped callers pass anything
    if isinstance(query, str):
        query = SearchQuery(query=query)
    if not isinstance(query, SearchQuery):  # an untyped caller's None was an AttributeError below
        msg = f"a query must be a str or a SearchQuery, got {type(query).__name__}"
        raise TypeError(msg)
    as_of = checked_struct(query, path=path).as_of  # a datetime, also when given as RFC 3339 text
    if as_of is not None and as_of.tzinfo is None:
        # The service refuses a time without an offset; this client has always read one as UTC.
        return msgspec.structs.replace(query, as_of=as_of.replace(tzinfo=UTC))
    return query


def _filter_query(where: DocumentFilter | None) -> dict[str, Any]:
    builtins: dict[str, Any] = msgspec.to_builtins(checked_struct(where, path="where")) if where is not None else {}
    return builtins


def _if_match_headers(if_match: object) -> dict[str, str]:
    """The `If-Match` header of a versioned write, checked: `True` went out as `If-Match: True`, `7.5` as `7.5`.

    A version (an int, 0 or more) or `*`; a str other than `*` is sent as given (an `ETag` the service sent,
    `"7-pending"`, is a version it takes back, and it refuses anything else naming `If-Match`).
    """
    if if_match is None:
        return {}
    if isinstance(if_match, bool) or not isinstance(if_match, int | str):
        msg = f"if_match must be int | '*' | None, got {type(if_match).__name__}: nothing was sent"
        raise TypeError(msg)
    if isinstance(if_match, int) and if_match < 0:
        msg = f"if_match must be a version, 0 or more, or '*', got {if_match}: nothing was sent"
        raise ValueError(msg)
    return {"If-Match": checked_text("if_match", str(if_match))}


def _page_query(limit: object, cursor: object) -> dict[str, Any]:
    """`limit` and `cursor` of a listing, checked: a query string would carry `"10"` or `5` as well."""
    if isinstance(limit, bool) or not isinstance(limit, int):
        msg = f"limit must be int, got {type(limit).__name__}: nothing was sent"
        raise TypeError(msg)
    if cursor is not None and not isinstance(cursor, str):
        msg = f"cursor must be str | None, got {type(cursor).__name__}: nothing was sent"
        raise TypeError(msg)
    return {"limit": limit, "cursor": cursor}


class Endpoints:
    """The API's operations; `PoimenClient` and `AsyncPoimenClient` inherit them."""

    # Search

    @endpoint("GET", "/memory/query", response=SearchResponse)
    def memory_query(project: str, query: str | SearchQuery) -> Call:
        """Search a project with the service's defaults (the reference endpoint).

        `query` may carry `limit`, `strategy`, `fusion`, `explain`, `offset`, `cursor` and `as_of`; filters,
        weights and the other options need `search()`.
        """
        search_query = _search_query(query)
        fields: dict[str, Any] = msgspec.to_builtins(search_query)
        unsupported = sorted(set(fields) - MEMORY_QUERY_FIELDS)
        if unsupported:
            msg = f"GET /memory/query does not take {', '.join(unsupported)}: use search()"
            raise ValueError(msg)
        return Call(query={"project": checked_project_id(project), **fields})

    @endpoint("POST", "/v1/search", response=SearchResponse)
    def search(project: str, query: str | SearchQuery) -> Call:
        """Search a project with filters, strategy, fusion, weights, collapse, min_score, paging.

        Page with `SearchQuery(query=..., offset=0)`, then `cursor=answer.next_cursor` until it is None.
        """
        return Call(body={"project": checked_project_id(project), **msgspec.to_builtins(_search_query(query))})

    @endpoint("POST", "/v1/search/batch", response=BatchSearchResponse)
    def search_batch(project: str, queries: Sequence[str | SearchQuery]) -> Call:
        """Several searches of one project in one request; one response per query, in order."""
        if isinstance(queries, str):
            msg = "queries must be a list of queries (a str would send one query per letter)"
            raise TypeError(msg)
        checked = [_search_query(query, path=f"queries[{index}]") for index, query in enumerate(queries)]
        return Call(body={"project": checked_project_id(project), "queries": checked})

    # Documents

    @endpoint("POST", "/v1/projects/{project}/documents", response=IngestResponse)
    def ingest(
        project: str, documents: Document | Sequence[Document], *, if_match: int | Literal["*"] | None = None
    ) -> Call:
        """Write one document or several (atomically); PostgreSQL holds them when this returns.

        `if_match` (one document only) or each document's `expected_version`: write only if the stored
        version is that one, else `ConflictError` with the `current_version`. `if_match="*"` updates only
        a document that exists, at any version; `expected_version=0` creates only one that does not.
        """
        if isinstance(documents, Document):
            checked_struct(documents)
            body: object = documents
        elif if_match is not None:
            msg = "if_match applies to one document; give each document of a batch its expected_version"
            raise ValueError(msg)
        else:
            batch = list(documents)
            for index, document in enumerate(batch):
                if isinstance(document, Document):  # a dict of the same fields is sent as given, as ever
                    checked_struct(document, path=f"documents[{index}]")
            body = {"documents": batch}
        return Call(
            path_values={"project": checked_project_id(project)}, body=body, headers=_if_match_headers(if_match)
        )

    @endpoint("GET", "/v1/projects/{project}/documents", response=DocumentPage)
    def list_documents(
        project: str, *, where: DocumentFilter | None = None, limit: int = 100, cursor: str | None = None
    ) -> Call:
        """One page of a project's documents by id; pass `next_cursor` back as `cursor` until it is None."""
        return Call(
            path_values={"project": checked_project_id(project)},
            query={**_page_query(limit, cursor), **_filter_query(where)},
        )

    @endpoint("GET", "/v1/projects/{project}/documents/{document_id}", response=StoredDocument)
    def get_document(project: str, document_id: str) -> Call:
        """A stored document with its chunks in order; `NotFoundError` if there is none."""
        return Call(path_values={"project": checked_project_id(project), "document_id": document_id})

    @endpoint("DELETE", "/v1/projects/{project}/documents/{document_id}", response=type(None))
    def delete_document(project: str, document_id: str, *, if_match: int | Literal["*"] | None = None) -> Call:
        """Delete a document and its chunks; `NotFoundError` if there is none, `ConflictError` if stale.

        With `if_match="*"` a missing document is a `ConflictError`, as HTTP's `If-Match: *` has it.
        """
        return Call(
            path_values={"project": checked_project_id(project), "document_id": document_id},
            headers=_if_match_headers(if_match),
        )

    @endpoint("DELETE", "/v1/projects/{project}/documents", response=Deleted)
    def delete_documents(project: str, where: DocumentFilter) -> Call:
        """Delete every document matching all conditions of `where` (at least one), in one transaction."""
        return Call(path_values={"project": checked_project_id(project)}, query=_filter_query(where))

    # Projects and operations

    @endpoint("GET", "/v1/projects", response=ProjectPage)
    def list_projects(*, limit: int = 100, cursor: str | None = None) -> Call:
        """One page of the projects the token may read (all without auth); pass `next_cursor` back as `cursor`."""
        return Call(query=_page_query(limit, cursor))

    @endpoint("GET", "/v1/projects/{project}", response=ProjectStats)
    def project_stats(project: str) -> Call:
        """Document and chunk counts and the lexical backlog; an unknown project answers zeros."""
        return Call(path_values={"project": checked_project_id(project)})

    @endpoint("DELETE", "/v1/projects/{project}", response=Deleted)
    def delete_project(project: str) -> Call:
        """Delete a whole project (needs the `admin` scope)."""
        return Call(path_values={"project": checked_project_id(project)})

    @endpoint("POST", "/v1/projects/{project}/reindex", response=Reindexed)
    def reindex(project: str) -> Call:
        """Queue every document of the project for lexical indexing again (needs `admin`)."""
        return Call(path_values={"project": checked_project_id(project)})

    @endpoint("GET", "/admin/flags", response=dict[str, Any])
    def flags() -> Call:
        """The effective flags, each value with where it came from (needs `admin`)."""
        return Call()

    @endpoint("GET", "/healthz", response=Liveness)
    def liveness() -> Call:
        """The process answers."""
        return Call()

    @endpoint("GET", "/readyz", response=Readiness, also_success=frozenset({503}))
    def readiness() -> Call:
        """Whether every engine answers: `status == "ready"`; a not-ready service is an answer, not an error."""
        return Call()

    @endpoint("GET", "/metrics", response=str)
    def metrics() -> Call:
        """The Prometheus exposition text."""
        return Call()
