"""Row-level security scope: which projects a PostgreSQL transaction may see, set with `SET LOCAL`.

Migration 0004 puts policies on every table that holds project rows. A row is visible (and writable)
only when its `project_id` is in `poimen.project_ids` (a text array literal), or when the transaction
declared the cross-project maintenance scope, `poimen.scope = 'all_projects'`. A transaction that
set neither sees nothing. Both settings are set with `set_config(..., true)`, which is `SET LOCAL`:
they end with the transaction, so a pooled connection never carries one request's projects into the
next. Every statement the adapters run goes through `project_transaction` (or its read-only twin on
the driver's connection, `app.engines.postgres_driver.project_read`, for the per-query reads) or,
for the few paths that span projects by design, `all_projects_transaction` (docs/security.md lists them). The one
exception is the per-query generation read, `poimen_project_generation(project)` (migration 0005): a
function that sets and restores the same scope itself, so it needs no transaction around it.

Only a role that is neither superuser nor table owner (nor `BYPASSRLS`) is held to the policies; the
migration also forces them on the owner (`FORCE ROW LEVEL SECURITY`). `app.engines.postgres_roles`
makes such a role for the embedded server.
"""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Final, Literal

from sqlalchemy import text

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterable

    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

_logger = logging.getLogger(__name__)

PROJECTS_SETTING: Final = "poimen.project_ids"
"""The projects a transaction may read and write, as a PostgreSQL text array literal."""
SCOPE_SETTING: Final = "poimen.scope"
"""`all_projects` lets a transaction span every project: maintenance paths only."""
ALL_PROJECTS: Final = "all_projects"

SET_LOCAL_PROJECTS: Final = f"SELECT set_config('{PROJECTS_SETTING}', CAST(CAST(:projects AS text[]) AS text), true)"
"""PostgreSQL writes the array literal itself, so no project id is ever quoted by hand."""
SET_LOCAL_ALL_PROJECTS: Final = f"SELECT set_config('{SCOPE_SETTING}', '{ALL_PROJECTS}', true)"

IsolationLevel = Literal["READ COMMITTED", "REPEATABLE READ"]
MaintenanceReason = Literal[
    "drain outbox",
    "outbox stats",
    "list projects",
    "stored embedding model",
]
"""Every path allowed to span projects, by name: a new one has to be added here, in review."""


@asynccontextmanager
async def project_transaction(
    engine: AsyncEngine,
    project_ids: Iterable[str],
    *,
    write: bool = False,
    isolation_level: IsolationLevel = "READ COMMITTED",
    read_only: bool = False,
) -> AsyncIterator[AsyncConnection]:
    """A transaction that sees only the rows of `project_ids`; committed at the end when `write`, else rolled back.

    With no project ids it sees nothing at all. `read_only` (not with `write`) starts it `READ ONLY`.
    """
    async with _transaction(engine, write=write, isolation_level=isolation_level, read_only=read_only) as connection:
        await connection.execute(text(SET_LOCAL_PROJECTS), {"projects": sorted(set(project_ids))})
        yield connection


@asynccontextmanager
async def all_projects_transaction(
    engine: AsyncEngine, *, reason: MaintenanceReason, write: bool = False
) -> AsyncIterator[AsyncConnection]:
    """A transaction that spans every project, for the maintenance path named by `reason`."""
    _logger.debug("cross-project maintenance scope", extra={"reason": reason})
    async with _transaction(engine, write=write, isolation_level="READ COMMITTED") as connection:
        await connection.execute(text(SET_LOCAL_ALL_PROJECTS))
        yield connection


@asynccontextmanager
async def _transaction(
    engine: AsyncEngine, *, write: bool, isolation_level: IsolationLevel, read_only: bool = False
) -> AsyncIterator[AsyncConnection]:
    if write:
        async with engine.begin() as connection:
            yield connection
        return
    async with engine.connect() as plain_connection:
        connection = plain_connection
        if isolation_level != "READ COMMITTED" or read_only:
            connection = await plain_connection.execution_options(
                isolation_level=isolation_level, postgresql_readonly=read_only
            )
        yield connection
        # On an error the pool's reset-on-return rolls back; here it is explicit and cheap.
        await connection.rollback()
