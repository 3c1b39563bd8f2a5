"""The embedded server's runtime role: the service's own login, held to the row-level security policies.

The pip package's server has one role, `postgres`, a superuser, and superusers bypass every policy even
with `FORCE ROW LEVEL SECURITY`. So the embedded mode migrates as `postgres` (the tables' owner) and
then serves as `poimen_runtime`: LOGIN, not superuser, no `BYPASSRLS`, owner of nothing, with only the
grants the adapters need. External deployments bring their own runtime role (docs/security.md).
"""

from __future__ import annotations

from typing import Final

from sqlalchemy import text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.ext.asyncio import create_async_engine

RUNTIME_ROLE: Final = "poimen_runtime"
ROLE_LOCK_ID: Final = 7_402_113_002
"""Advisory lock key: processes sharing one embedded server create the role one at a time."""
PROJECT_TABLES: Final = ("documents", "chunks", "lexical_outbox", "project_generations")
"""The tables the runtime role reads and writes: every table that holds project rows."""


def runtime_grants(role: str) -> tuple[str, ...]:
    """The GRANT statements a runtime role needs, and nothing more. `role` must be a plain SQL identifier."""
    return (
        f"GRANT USAGE ON SCHEMA public TO {role}",
        f"GRANT SELECT, INSERT, UPDATE, DELETE ON {', '.join(PROJECT_TABLES)} TO {role}",
        # USAGE is what nextval() needs: the version columns' defaults and the outbox's bumps.
        f"GRANT USAGE ON SEQUENCE document_version_seq, lexical_outbox_version_seq TO {role}",
    )


RUNTIME_GRANTS: Final = runtime_grants(RUNTIME_ROLE)
CREATE_ROLE: Final = (
    f"DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{RUNTIME_ROLE}') THEN "
    f"CREATE ROLE {RUNTIME_ROLE}; END IF; END $$"
)
# Also run on a role that existed already: whoever changed its attributes, it serves without privileges.
RESET_ATTRIBUTES: Final = (
    f"ALTER ROLE {RUNTIME_ROLE} LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE NOREPLICATION NOINHERIT"
)


async def ensure_runtime_role(owner_url: str) -> str:
    """Create (or reset) `poimen_runtime` with its grants, connected as the owner; return its URL.

    Idempotent, and safe from several processes at once. Run after the migrations: the grants name
    their tables. The embedded server trusts local (unix socket) logins, so the role has no password.
    """
    engine = create_async_engine(owner_url)
    try:
        async with engine.begin() as connection:
            await connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": ROLE_LOCK_ID})
            for statement in (CREATE_ROLE, RESET_ATTRIBUTES, *RUNTIME_GRANTS):
                await connection.execute(text(statement))
    finally:
        await engine.dispose()
    return runtime_url(owner_url)


def runtime_url(owner_url: str) -> str:
    """`owner_url` with the runtime role as its user and no password."""
    owner = make_url(owner_url)
    # Not `owner.set(password=None)`: `set` leaves a field alone when given None.
    url = URL.create(
        owner.drivername,
        username=RUNTIME_ROLE,
        host=owner.host,
        port=owner.port,
        database=owner.database,
        query=owner.query,
    )
    return url.render_as_string(hide_password=False)
