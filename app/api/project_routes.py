"""Project endpoints: the projects listing, a project's stats and its deletion; the document filters.

The listing (`GET .../documents`) and delete by filter (`DELETE .../documents`) are on `DocumentController`
(one controller per path); their query parameters and selection are defined here.

Scopes: reading (the projects, stats, listing) is `search`, like reading one document; the projects
listing names only those the token grants. Deleting by filter is `ingest`:
a caller who may write and delete documents one at a time may delete the same documents by a filter.
Deleting a whole project is `admin`: it is irreversible for everything the project holds, so an agent's
ingest token cannot wipe a project by mistake (a filter that selects everything still needs a condition).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Final

from litestar import Controller, Request, delete, get
from litestar.datastructures import State
from litestar.params import PathParameter, QueryParameter
from litestar.status_codes import HTTP_200_OK

from app.api.cursors import encode_cursor, keyset_after
from app.api.dependencies import Injected
from app.api.errors import problem_responses
from app.api.guards import admin_guard, principal_of, search_guard
from app.api.project_schemas import DeletedOut, ProjectListOut, ProjectOut, ProjectStatsOut, stats_out
from app.api.strict_queries import request_time
from app.domain.catalog import DocumentSelection
from app.domain.errors import InvalidInputError
from app.domain.moments import as_utc
from app.domain.project_ids import PROJECT_ID_PATTERN, PROJECT_ID_RULE
from app.ingestion.catalog import MAX_PAGE_SIZE, ProjectCatalog
from app.observability.metrics import record_ingested

ProjectPath = Annotated[str, PathParameter(description=f"Project id: {PROJECT_ID_RULE}", pattern=PROJECT_ID_PATTERN)]
PROJECT_ERROR_RESPONSES = problem_responses(400, 401, 403, 503, 504)
PROJECT_WRITE_ERROR_RESPONSES = problem_responses(400, 401, 403, 503, 504, 507)
"""What an operation on a project by its path can answer besides success: bad input, auth, a failing engine."""
NO_NUL_PATTERN = "^[^\\u0000]*$"
"""PostgreSQL text cannot hold U+0000: a filter with one could match nothing, and is refused as a 400."""
SourcePrefix = Annotated[
    str | None,
    QueryParameter(description="Only documents whose source starts with this", pattern=NO_NUL_PATTERN),
]
Tag = Annotated[
    str | None, QueryParameter(description="Only documents carrying this tag (case is ignored)", pattern=NO_NUL_PATTERN)
]
TIME_RULE: Final = (
    "RFC 3339, e.g. 2024-05-08T12:00:00Z (a number is a 400); naive = UTC; send a `+` offset as %2B; kept to the"
    " microsecond: digits past it are dropped, not rounded"
)
# Read as text, then by `request_time` as every request's time is: the framework's own parsing rounded
# `9999-12-31T23:59:59.9999999Z` to year 10000 and refused it, where a search's body or `as_of` took it.
EventFrom = Annotated[
    str | None,
    QueryParameter(description=f"Event time at or after ({TIME_RULE})", schema_extra={"format": "date-time"}),
]
EventTo = Annotated[
    str | None, QueryParameter(description=f"Event time before ({TIME_RULE})", schema_extra={"format": "date-time"})
]
UpdatedSince = Annotated[
    str | None, QueryParameter(description=f"Written at or after ({TIME_RULE})", schema_extra={"format": "date-time"})
]


def document_selection(  # noqa: PLR0913 - one parameter per filter
    project: str,
    *,
    source_prefix: str | None,
    tag: str | None,
    event_time_from: str | None,
    event_time_to: str | None,
    updated_since: str | None,
) -> DocumentSelection:
    """The selection the query-string filters name; naive times are UTC; an empty time range is a 400.

    The times are read by `request_time`, truncated to the microsecond: Litestar's parsing rounded them, so
    `event_time_to=2024-12-31T23:59:59.9999999Z` held a document written at that instant.

    An empty or blank tag (`?tag=`, white space only) is a 400: no stored tag is blank, so it could only
    select nothing, and taking it for no filter widened a filtered delete to every tag.
    """
    if tag is not None and not tag.strip():
        msg = "tag is empty or blank (only white space)"
        raise InvalidInputError(msg, field="tag")
    start = _time(event_time_from, field="event_time_from")
    end = _time(event_time_to, field="event_time_to")
    if start is not None and end is not None and start >= end:
        msg = "event_time_from must be before event_time_to"
        raise InvalidInputError(msg, field="event_time_from")
    return DocumentSelection(
        project_id=project,
        source_prefix=source_prefix or None,
        tag=tag or None,
        event_time_from=start,
        event_time_to=end,
        updated_since=_time(updated_since, field="updated_since"),
    )


def _time(text: str | None, *, field: str) -> datetime | None:
    """A filter's time in UTC (naive: UTC), read as every request's time is; None when not given."""
    return None if text is None else as_utc(request_time(text, field=field))


PROJECTS_CURSOR: Final = "projects"


class ProjectListController(Controller):
    """The projects a caller may read."""

    path = "/v1/projects"
    tags = ["projects"]  # noqa: RUF012 - Litestar reads it as a class attribute

    @get(
        "/",
        summary="List the projects the caller may read that hold documents (cursor pagination)",
        guards=[search_guard],
        responses=problem_responses(400, 401, 403, 503, 504),
    )
    async def list_projects(
        self,
        request: Request[Any, Any, State],
        catalog: Injected[ProjectCatalog],
        limit: Annotated[int, QueryParameter(ge=1, le=MAX_PAGE_SIZE, description="Page size")] = 100,
        cursor: Annotated[str | None, QueryParameter(description="`next_cursor` of the previous page")] = None,
    ) -> ProjectListOut:
        """Project ids by code point order. A token lists only the projects it grants (`"*"`: all)."""
        after = keyset_after(cursor, kind=PROJECTS_CURSOR)
        page = await catalog.projects(principal_of(request).projects, after=after, limit=limit)
        return ProjectListOut(
            items=[ProjectOut(project=project_id) for project_id in page.project_ids],
            next_cursor=None if page.next_after is None else encode_cursor(PROJECTS_CURSOR, {"after": page.next_after}),
        )


class ProjectController(Controller):
    """A project as a whole: stats and deletion."""

    path = "/v1/projects/{project:str}"
    tags = ["projects"]  # noqa: RUF012 - Litestar reads it as a class attribute

    @get(
        "/",
        summary="A project's document and chunk counts and lexical backlog",
        guards=[search_guard],
        responses=PROJECT_ERROR_RESPONSES,
    )
    async def stats(self, project: ProjectPath, catalog: Injected[ProjectCatalog]) -> ProjectStatsOut:
        """Counts from PostgreSQL; `pending` documents await lexical indexing. Unknown project: zeros."""
        return stats_out(await catalog.stats(project))

    @delete(
        "/",
        summary="Delete a whole project",
        status_code=HTTP_200_OK,
        guards=[admin_guard],
        responses=PROJECT_WRITE_ERROR_RESPONSES,
    )
    async def remove_project(self, project: ProjectPath, catalog: Injected[ProjectCatalog]) -> DeletedOut:
        """Delete every document and chunk from PostgreSQL now; the lexical index follows through the outbox.

        The project's generation moves on in the same transaction, so no replica serves a cached answer
        from before the delete. Needs the `admin` scope.
        """
        deleted = await catalog.delete(DocumentSelection(project_id=project))
        record_ingested(status="deleted", documents=deleted)
        return DeletedOut(project=project, deleted=deleted)
