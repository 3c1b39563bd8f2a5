"""The embedded server's runtime role: the service's own login, held to the row-level security policies.

The pip package's server has one role, `postgres`, a superuser, and superusers bypass every policy even
with `FORCE ROW LEVEL SECURITY`. So the embedded mode migrates as `postgres` (the tables' owner) and
then serves as `poimen_runtime`: LOGIN, not superuser, no `BYPASSRLS`, owner of nothing, with only the
grants the adapters need. External deployments bring their own runtime role (docs/security.md), and
`poimen migrate` with `DATABASE_RUNTIME_ROLE` grants it the same (`grant_runtime_role`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from sqlalchemy import text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import DBAPIError

from app.config import ConfigurationError
from app.engines.postgres_connect import create_asyncpg_engine
from app.engines.postgres_errors import sqlstate_in_chain, translate_errors

if TYPE_CHECKING:
    from sqlalchemy.engine import Row
    from sqlalchemy.ext.asyncio import AsyncConnection

RUNTIME_ROLE: Final = "poimen_runtime"
ROLE_LOCK_ID: Final = 7_402_113_002
"""Advisory lock key: processes sharing one server create or grant a runtime role one at a time.

Two GRANTs on one object at once fail the second ("tuple concurrently updated"): two `poimen migrate`
at once (two pods' init containers, a Job retried while the first still runs) must take turns.
"""
PROJECT_TABLES: Final = ("documents", "chunks", "lexical_outbox", "project_generations")
"""The tables the runtime role reads and writes: every table that holds project rows."""


def runtime_grants(role: str) -> tuple[str, ...]:
    """The GRANT statements a runtime role needs, and nothing more. `role` must be a plain SQL identifier."""
    return (
        f"GRANT USAGE ON SCHEMA public TO {role}",
        f"GRANT SELECT, INSERT, UPDATE, DELETE ON {', '.join(PROJECT_TABLES)} TO {role}",
        # USAGE is what nextval() needs: the version columns' defaults and the outbox's bumps.
        f"GRANT USAGE ON SEQUENCE document_version_seq, lexical_outbox_version_seq TO {role}",
        # Read at start (`check_schema_revision`): a service must not serve a schema its release does not expect.
        f"GRANT SELECT ON alembic_version TO {role}",
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
    engine = create_asyncpg_engine(owner_url)
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


# What `grant_runtime_role` checks before granting: the role exists, cannot bypass the policies, and can
# neither be nor become the tables' owner (a member of the owner's role may `SET ROLE` to it).
ROLE_FACTS: Final = """
SELECT r.rolsuper AS superuser, r.rolbypassrls AS bypassrls,
       coalesce(bool_or(pg_has_role(r.oid, t.tableowner, 'MEMBER')), false) AS owner
FROM pg_roles r LEFT JOIN pg_tables t ON t.schemaname = 'public' AND t.tablename = ANY(:tables)
WHERE r.rolname = :role
GROUP BY r.rolsuper, r.rolbypassrls
"""


async def grant_runtime_role(owner_url: str, role: str) -> None:
    """Grant an existing `role` what the service needs (`runtime_grants`), connected as the tables' owner.

    For databases whose runtime role someone else creates (CloudNativePG's managed roles, a DBA): the role is
    never created or altered here. Idempotent. Run after the migrations: the grants name their tables.
    Raises `ConfigurationError` when the role does not exist (yet), is a superuser, has `BYPASSRLS`, or is
    (or is a member of) the tables' owner: with any of these the row-level security policies would not hold it.
    Safe from several processes at once (they take turns on `ROLE_LOCK_ID`). Raises `ConfigurationError` too when
    the connected user may not grant the tables (it is not their owner): PostgreSQL refused some GRANTs and
    only warned of others ("no privileges were granted"), so each privilege is checked after granting.
    """
    engine = create_asyncpg_engine(owner_url)
    try:
        with translate_errors(engine="postgresql"):
            async with engine.begin() as connection:
                await connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": ROLE_LOCK_ID})
                facts = (
                    await connection.execute(text(ROLE_FACTS), {"role": role, "tables": list(PROJECT_TABLES)})
                ).one_or_none()
                problem = _runtime_role_problem(role, facts)
                if problem is not None:
                    raise ConfigurationError(problem)
                await _grant_or_refuse(connection, role)
    finally:
        await engine.dispose()


INSUFFICIENT_PRIVILEGE_SQLSTATE: Final = "42501"


def runtime_privilege_checks(role_parameter: str) -> tuple[tuple[str, str], ...]:
    """(what, SQL that is true when the role holds it) for every privilege of `runtime_grants`, one each.

    One privilege per check: `has_table_privilege(role, t, 'SELECT, INSERT')` is true when either is held.
    """
    tables = tuple(
        (f"{privilege} on {table}", f"has_table_privilege({role_parameter}, '{table}', '{privilege}')")
        for table in PROJECT_TABLES
        for privilege in ("SELECT", "INSERT", "UPDATE", "DELETE")
    )
    sequences = tuple(
        (f"USAGE on {sequence}", f"has_sequence_privilege({role_parameter}, '{sequence}', 'USAGE')")
        for sequence in ("document_version_seq", "lexical_outbox_version_seq")
    )
    return (
        ("USAGE on schema public", f"has_schema_privilege({role_parameter}, 'public', 'USAGE')"),
        *tables,
        *sequences,
        ("SELECT on alembic_version", f"has_table_privilege({role_parameter}, 'alembic_version', 'SELECT')"),
    )


MISSING_PRIVILEGES: Final = "SELECT " + ", ".join(
    f"CASE WHEN {held} THEN NULL ELSE '{what}' END" for what, held in runtime_privilege_checks("CAST(:role AS text)")
)
GRANTOR_AND_OWNER: Final = (
    "SELECT current_user, (SELECT tableowner FROM pg_tables WHERE schemaname = 'public' AND tablename = 'documents')"
)


async def _grant_or_refuse(connection: AsyncConnection, role: str) -> None:
    """Run `runtime_grants(role)`, then check each privilege is held: refuse in one line when one is not."""
    grantor, owner = (await connection.execute(text(GRANTOR_AND_OWNER))).one()
    try:
        for statement in runtime_grants(role):
            await connection.execute(text(statement))
        missing = [what for what in (await connection.execute(text(MISSING_PRIVILEGES), {"role": role})).one() if what]
    except DBAPIError as error:
        if not sqlstate_in_chain(error, INSUFFICIENT_PRIVILEGE_SQLSTATE):
            raise
        reason = str(getattr(error, "orig", error)).strip().splitlines()[0]
    else:
        if not missing:
            return
        reason = f"{len(missing)} of its privileges were not granted, first {missing[0]}"
    message = (
        f"DATABASE_RUNTIME_ROLE={role}: DATABASE_URL's user {grantor} may not grant it the tables ({reason}); "
        "PostgreSQL grants only what a role owns or holds WITH GRANT OPTION: run `poimen migrate` with DATABASE_URL "
        f"as the tables' owner ({owner})"
    )
    raise ConfigurationError(message)


def _runtime_role_problem(role: str, facts: Row[Any] | None) -> str | None:
    if facts is None:
        return (
            f"DATABASE_RUNTIME_ROLE={role}: no such role in the database yet. Create it first (LOGIN, not superuser,"
            " not the owner); CloudNativePG creates a managed role once the Cluster is ready, so the migrations Job"
            " fails and Kubernetes runs it again"
        )
    if facts.superuser or facts.bypassrls:
        return f"DATABASE_RUNTIME_ROLE={role} is a superuser or has BYPASSRLS: row-level security would not hold it"
    if facts.owner:
        return (
            f"DATABASE_RUNTIME_ROLE={role} owns the tables (or is a member of their owner's role): an owner can switch"
            " row-level security off; use a separate role (docs/security.md, 'External PostgreSQL')"
        )
    return None
