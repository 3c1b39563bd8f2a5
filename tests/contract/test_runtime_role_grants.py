"""`poimen migrate` with DATABASE_RUNTIME_ROLE: the chart's two-role set-up on a real PostgreSQL.

The database is laid out as CloudNativePG lays out its `Cluster`: an application database owned by a
plain login role (`app`: no superuser), the `vector` extension created by the superuser at bootstrap, and
a managed runtime role (LOGIN, not superuser, INHERIT as CloudNativePG's default) that owns nothing. The
migration runs as the owner in a real `poimen migrate` process; the service's adapters then run as the
runtime role, and the row-level security policies hold them.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from typing import TYPE_CHECKING

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError

from app.domain.models import Filters
from app.engines.pgvector import PgVectorIndex, create_postgres_engine
from app.engines.postgres import PostgresDocumentStore
from app.engines.postgres_roles import PROJECT_TABLES, grant_runtime_role
from app.engines.postgres_scope import project_transaction
from tests.contract.document_store import embedding, entry

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator
    from pathlib import Path

    from sqlalchemy.ext.asyncio import AsyncEngine

pytestmark = pytest.mark.integration


def url_as(url: str, *, user: str, database: str) -> str:
    """`url` with another user (no password: the embedded server trusts its unix socket) and database."""
    return make_url(url).set(username=user, password="", database=database).render_as_string(hide_password=False)


async def run_as_superuser(postgres_url: str, *statements: str, database: str | None = None) -> None:
    url = postgres_url if database is None else url_as(postgres_url, user="postgres", database=database)
    # CREATE/DROP DATABASE cannot run inside a transaction block.
    engine = create_postgres_engine(url, pool_size=1).execution_options(isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as connection:
            for statement in statements:
                await connection.execute(text(statement))
    finally:
        await engine.dispose()


class Cluster:
    """Names and URLs of one CloudNativePG-like database on the session's server."""

    def __init__(self, postgres_url: str) -> None:
        suffix = uuid.uuid4().hex[:8]
        self.database, self.owner, self.runtime = f"app_{suffix}", f"app_{suffix}", f"runtime_{suffix}"
        self.owner_url = url_as(postgres_url, user=self.owner, database=self.database)
        self.runtime_url = url_as(postgres_url, user=self.runtime, database=self.database)


@pytest.fixture(scope="module")
async def cluster(postgres_url: str) -> AsyncIterator[Cluster]:
    names = Cluster(postgres_url)
    await run_as_superuser(
        postgres_url,
        f"CREATE ROLE {names.owner} LOGIN NOSUPERUSER",
        f"CREATE DATABASE {names.database} OWNER {names.owner}",
        f"CREATE ROLE {names.runtime} LOGIN NOSUPERUSER INHERIT",
    )
    # What the chart's postInitApplicationSQL does: the extension, by the superuser, before the owner migrates.
    await run_as_superuser(postgres_url, "CREATE EXTENSION IF NOT EXISTS vector", database=names.database)
    yield names
    await run_as_superuser(
        postgres_url,
        f"DROP DATABASE {names.database} WITH (FORCE)",
        f"DROP ROLE {names.runtime}",
        f"DROP ROLE {names.owner}",
    )


def poimen_migrate(database_url: str, runtime_role: str, data_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "DATABASE_RUNTIME_ROLE": runtime_role,
        "POIMEN_DATA_DIR": str(data_dir),
    }
    return subprocess.run(
        [sys.executable, "-m", "app", "migrate"], env=env, capture_output=True, text=True, check=False, timeout=300
    )


@pytest.fixture(scope="module")
def migrated(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    """Two runs of `poimen migrate` as the owner, granting the runtime role: their stderr (the second proves idempotence)."""
    data_dir = tmp_path_factory.mktemp("migrate")
    runs = [poimen_migrate(cluster.owner_url, cluster.runtime, data_dir) for _ in range(2)]
    assert [run.returncode for run in runs] == [0, 0], runs[-1].stderr[-2000:]
    return [run.stderr for run in runs]


@pytest.fixture
async def runtime_engine(cluster: Cluster, migrated: list[str]) -> AsyncIterator[AsyncEngine]:
    assert migrated
    engine = create_postgres_engine(cluster.runtime_url, pool_size=1)
    yield engine
    await engine.dispose()


async def test_migrate_grants_a_role_that_is_neither_superuser_nor_owner(
    runtime_engine: AsyncEngine, cluster: Cluster, migrated: list[str]
) -> None:
    async with runtime_engine.connect() as connection:
        role = (
            await connection.execute(
                text("SELECT current_user AS name, rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user")
            )
        ).one()
        owners = dict(
            (
                await connection.execute(
                    text("SELECT tablename, tableowner FROM pg_tables WHERE tablename = ANY(:tables)"),
                    {"tables": list(PROJECT_TABLES)},
                )
            ).all()
        )

    assert (role.name, role.rolsuper, role.rolbypassrls) == (cluster.runtime, False, False)
    assert owners == dict.fromkeys(PROJECT_TABLES, cluster.owner)
    assert all(f"runtime role {cluster.runtime} granted" in stderr for stderr in migrated)


async def test_the_runtime_role_reads_and_writes_through_the_adapters(runtime_engine: AsyncEngine) -> None:
    store = PostgresDocumentStore(runtime_engine)

    await store.save_documents([entry("alpha", "doc", 2)])
    stored = await store.get_document("alpha", "doc")
    hits = await PgVectorIndex(runtime_engine).search(embedding(1.0), top_k=5, filters=Filters(project_id="alpha"))
    deleted = await store.delete_document("alpha", "doc")

    assert stored is not None
    assert len(hits) == 2
    assert deleted is True


async def test_row_level_security_holds_the_runtime_role(runtime_engine: AsyncEngine) -> None:
    store = PostgresDocumentStore(runtime_engine)
    await store.save_documents([entry("mine", "doc", 1), entry("theirs", "doc", 1)])

    async with runtime_engine.connect() as connection:
        # No scope set and no filter: the policies return nothing, although both projects have rows.
        unscoped = {
            table: (await connection.execute(text(f"SELECT count(*) FROM {table}"))).scalar_one()  # noqa: S608 - constant names
            for table in PROJECT_TABLES
        }
    async with project_transaction(runtime_engine, ["mine"]) as connection:
        # A project's scope and no filter: that project's rows only.
        seen = {row.project_id for row in await connection.execute(text("SELECT project_id FROM chunks"))}
    with pytest.raises(DBAPIError, match="must be owner"):
        async with runtime_engine.begin() as connection:
            await connection.execute(text("ALTER TABLE documents NO FORCE ROW LEVEL SECURITY"))

    assert unscoped == dict.fromkeys(PROJECT_TABLES, 0)
    assert seen == {"mine"}


@pytest.mark.parametrize(
    ("role", "message"),
    [
        ("nobody_here", "no such role in the database yet"),
        ("postgres", "is a superuser or has BYPASSRLS"),
        ("owner", "owns the tables"),
    ],
)
def test_migrate_refuses_a_role_the_policies_would_not_hold(
    cluster: Cluster, migrated: list[str], tmp_path: Path, role: str, message: str
) -> None:
    assert migrated
    role_name = cluster.owner if role == "owner" else role

    result = poimen_migrate(cluster.owner_url, role_name, tmp_path)

    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr


async def test_the_grants_of_several_migrations_at_once_take_turns(cluster: Cluster, migrated: list[str]) -> None:
    # Two pods' `poimen migrate` (init containers, or a Job retried while the first still runs) grant at once:
    # PostgreSQL fails a GRANT whose catalog row another open transaction updated ("tuple concurrently
    # updated"), and the migration failed with a traceback. 56 of 120 such grants failed before.
    assert migrated
    for _ in range(5):
        results = await asyncio.gather(
            *(grant_runtime_role(cluster.owner_url, cluster.runtime) for _ in range(6)), return_exceptions=True
        )
        assert [repr(result) for result in results if isinstance(result, BaseException)] == []


@pytest.mark.parametrize("migrating_role", ["runtime", "stranger"])
async def test_migrate_refuses_in_one_line_when_its_user_may_not_grant_the_tables(
    cluster: Cluster, migrated: list[str], postgres_url: str, tmp_path: Path, migrating_role: str
) -> None:
    # The tables' owner must grant. `runtime` holds the privileges without GRANT OPTION: PostgreSQL only warned
    # "no privileges were granted" and migrate said "runtime role ... granted" (exit 0, nothing granted).
    # `stranger` may read alembic_version only: "permission denied for table documents" was a traceback.
    assert migrated
    suffix = uuid.uuid4().hex[:8]
    grantee, stranger = f"grantee_{suffix}", f"stranger_{suffix}"
    await run_as_superuser(postgres_url, f"CREATE ROLE {grantee} LOGIN", f"CREATE ROLE {stranger} LOGIN")
    await run_as_superuser(postgres_url, f"GRANT SELECT ON alembic_version TO {stranger}", database=cluster.database)
    user = cluster.runtime if migrating_role == "runtime" else stranger
    try:
        result = poimen_migrate(url_as(cluster.owner_url, user=user, database=cluster.database), grantee, tmp_path)
        owner_engine = create_postgres_engine(cluster.owner_url, pool_size=1)
        async with owner_engine.connect() as connection:
            held = text("SELECT has_table_privilege(:role, 'documents', 'SELECT')")
            granted = (await connection.execute(held, {"role": grantee})).scalar_one()
        await owner_engine.dispose()
    finally:
        await run_as_superuser(postgres_url, f"DROP OWNED BY {grantee}, {stranger} CASCADE", database=cluster.database)
        await run_as_superuser(postgres_url, f"DROP ROLE {grantee}", f"DROP ROLE {stranger}")

    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith(f"DATABASE_RUNTIME_ROLE={grantee}: "), result.stderr
    assert f"as the tables' owner ({cluster.owner})" in result.stderr
    assert granted is False
