"""The alembic migrations create exactly the tables of `app.engines.schema`, and re-running them is harmless."""

from __future__ import annotations

import asyncio
import logging

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import make_url, text
from sqlalchemy.ext.asyncio import create_async_engine

from app.config import ConfigurationError
from app.domain.catalog import DocumentSelection
from app.domain.models import Filters
from app.engines.migrate import alembic_config, check_schema_revision, run_migrations
from app.engines.postgres_catalog import selection_sql
from app.engines.postgres_roles import RUNTIME_ROLE, ensure_runtime_role
from app.engines.postgres_sql import filter_sql
from app.engines.schema import metadata

pytestmark = pytest.mark.integration


async def test_migrated_database_matches_schema_module(migrated_postgres_url) -> None:
    engine = create_async_engine(migrated_postgres_url)
    try:
        async with engine.connect() as connection:
            differences = await connection.run_sync(
                lambda sync: compare_metadata(MigrationContext.configure(sync), metadata)
            )
    finally:
        await engine.dispose()

    assert differences == []


def test_migrating_again_at_head_changes_nothing(migrated_postgres_url) -> None:
    run_migrations(migrated_postgres_url, embedding_dimensions=384)


async def test_every_table_with_project_rows_has_forced_row_level_security_policies(migrated_postgres_url) -> None:
    tables = ("chunks", "documents", "lexical_outbox", "project_generations")
    engine = create_async_engine(migrated_postgres_url)
    try:
        async with engine.connect() as connection:
            policies = (
                await connection.execute(
                    text(
                        "SELECT tablename, policyname, cmd, permissive, qual, with_check FROM pg_policies "
                        "WHERE schemaname = 'public' ORDER BY tablename, policyname"
                    )
                )
            ).all()
            flags = (
                await connection.execute(
                    text(
                        "SELECT relname, relrowsecurity, relforcerowsecurity FROM pg_class "
                        "WHERE relname = ANY(:tables) ORDER BY relname"
                    ),
                    {"tables": list(tables)},
                )
            ).all()
    finally:
        await engine.dispose()

    assert [(row.tablename, row.policyname) for row in policies] == [
        (table, policy) for table in tables for policy in ("maintenance_scope", "project_scope")
    ]
    assert {(row.cmd, row.permissive) for row in policies} == {("ALL", "PERMISSIVE")}
    assert all(row.qual == row.with_check for row in policies)
    assert all("poimen.project_ids" in row.qual for row in policies if row.policyname == "project_scope")
    assert all("poimen.scope" in row.qual for row in policies if row.policyname == "maintenance_scope")
    assert [tuple(row) for row in flags] == [(table, True, True) for table in tables]


async def _execute(url: str, *statements: str) -> list[list[tuple[object, ...]]]:
    """Run `statements` in one transaction under the maintenance scope; each one's rows."""
    engine = create_async_engine(url)
    try:
        async with engine.begin() as connection:
            await connection.execute(text("SELECT set_config('poimen.scope', 'all_projects', true)"))
            results = [await connection.execute(text(sql)) for sql in statements]
            return [[tuple(row) for row in result.all()] if result.returns_rows else [] for result in results]
    finally:
        await engine.dispose()


async def _create_database(url: str, name: str) -> str:
    engine = create_async_engine(url, isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as connection:
            # As CloudNativePG creates them: PostgreSQL's lower() leaves a non-ASCII capital as it is.
            await connection.execute(text(f"CREATE DATABASE \"{name}\" TEMPLATE template0 LC_COLLATE 'C' LC_CTYPE 'C'"))
    finally:
        await engine.dispose()
    return make_url(url).set(database=name).render_as_string(hide_password=False)


async def _ids_tagged(url: str, tag: str) -> tuple[list[str], list[str]]:
    """(chunk ids, document ids) of project `p` that the adapter's own tag filters select."""
    chunk_parameters: dict[str, object] = {}
    chunk_conditions = filter_sql(Filters(project_id="p", tags=(tag,)), chunk_parameters)
    document_parameters: dict[str, object] = {}
    document_conditions = selection_sql(DocumentSelection(project_id="p", tag=tag), document_parameters)
    engine = create_async_engine(url)
    try:
        async with engine.begin() as connection:
            await connection.execute(text("SELECT set_config('poimen.scope', 'all_projects', true)"))
            chunks = await connection.execute(
                text(f"SELECT chunk_id FROM chunks WHERE {chunk_conditions}"),  # noqa: S608 - the adapter's SQL
                chunk_parameters,
            )
            documents = await connection.execute(
                text(f"SELECT document_id FROM documents d WHERE {document_conditions}"),  # noqa: S608
                document_parameters,
            )
            return sorted(row[0] for row in chunks), sorted(row[0] for row in documents)
    finally:
        await engine.dispose()


def test_migration_0008_leaves_lowercase_tags_alone_and_every_row_filters_ignoring_case(
    postgres_url: str, unique_name: str
) -> None:
    url = asyncio.run(_create_database(postgres_url, unique_name))
    config = alembic_config(url, embedding_dimensions=384)
    command.upgrade(config, "0007")
    chunk = (
        "INSERT INTO chunks (project_id, chunk_id, document_id, text, source, level, section_title, position, tags, "
        "chunk_hash, embedding, embedding_model) VALUES ('p', '{id}#0', '{id}', 'x', 's', 'L0', '', 0, {tags}, 'h', "
        "CAST(array_fill(0.1, ARRAY[384]) AS vector), 'm')"
    )
    tagged, lower = "ARRAY['Kubernetes', 'SRE', 'ÉTÉ', 'ops']", "ARRAY['ops', 'été']"
    documents_sql = (
        "INSERT INTO documents (project_id, document_id, source, title, content_hash, tags) VALUES "  # noqa: S608
        f"('p', 'tagged', 's', 't', 'h', {tagged}), ('p', 'lower', 's', 't', 'h', {lower}), "
        "('p', 'plain', 's', 't', 'h', '{}')"
    )
    asyncio.run(
        _execute(
            url,
            documents_sql,
            chunk.format(id="tagged", tags=tagged),
            chunk.format(id="lower", tags=lower),
        )
    )

    command.upgrade(config, "head")

    documents, chunks = asyncio.run(
        _execute(
            url,
            "SELECT document_id, tags, tag_keys FROM documents ORDER BY document_id",
            "SELECT chunk_id, tag_keys FROM chunks ORDER BY chunk_id",
        )
    )
    # Only the rows holding a tag PostgreSQL lowers otherwise (`ÉTÉ` under "C") are keyed; the rest read
    # as PostgreSQL lowers them.
    assert [(row[0], row[2] and sorted(row[2])) for row in documents] == [
        ("lower", None),
        ("plain", None),
        ("tagged", ["kubernetes", "ops", "sre", "été"]),
    ]
    assert [(row[0], row[1] and sorted(row[1])) for row in chunks] == [
        ("lower#0", None),
        ("tagged#0", ["kubernetes", "ops", "sre", "été"]),
    ]
    assert asyncio.run(_ids_tagged(url, "KUBERNETES")) == (["tagged#0"], ["tagged"])
    assert asyncio.run(_ids_tagged(url, "Ops")) == (["lower#0", "tagged#0"], ["lower", "tagged"])
    assert asyncio.run(_ids_tagged(url, "été")) == (["lower#0", "tagged#0"], ["lower", "tagged"])
    assert asyncio.run(_ids_tagged(url, "sre")) == (["tagged#0"], ["tagged"])


def test_migration_0009_keys_dotted_i_and_capital_sigma_tags_letter_by_letter_and_queues_their_documents(
    postgres_url: str, unique_name: str
) -> None:
    url = asyncio.run(_create_database(postgres_url, unique_name))
    config = alembic_config(url, embedding_dimensions=384)
    command.upgrade(config, "0008")
    # Rows as the release before wrote them: keys by `str.lower`, chunks indexed.
    rows = {
        "turkish": ("ARRAY['İstanbul', 'ÉTÉ']", "ARRAY['i\u0307stanbul', 'été']"),
        "greek": ("ARRAY['ΟΔΟΣ']", "ARRAY['οδος']"),
        "plain": ("ARRAY['Ops']", "ARRAY['ops']"),
    }
    statements = []
    for document_id, (tags, keys) in rows.items():
        statements.append(
            "INSERT INTO documents (project_id, document_id, source, title, content_hash, tags, tag_keys) VALUES "  # noqa: S608 - the test's own literals
            f"('p', '{document_id}', 's', 't', 'h', {tags}, {keys})"
        )
        statements.append(
            "INSERT INTO chunks (project_id, chunk_id, document_id, text, source, level, section_title, position, "  # noqa: S608 - the test's own literals
            "tags, tag_keys, chunk_hash, embedding, embedding_model, lexically_indexed) VALUES ('p', "
            f"'{document_id}#0', '{document_id}', 'x', 's', 'L0', '', 0, {tags}, {keys}, 'h', "
            "CAST(array_fill(0.1, ARRAY[384]) AS vector), 'm', true)"
        )
    asyncio.run(_execute(url, *statements))

    command.upgrade(config, "head")

    documents, chunks, queued = asyncio.run(
        _execute(
            url,
            "SELECT document_id, tag_keys FROM documents ORDER BY document_id",
            "SELECT chunk_id, tag_keys, lexically_indexed FROM chunks ORDER BY chunk_id",
            "SELECT document_id FROM lexical_outbox ORDER BY document_id",
        )
    )
    assert [(row[0], sorted(row[1])) for row in documents] == [
        ("greek", ["οδοσ"]),
        ("plain", ["ops"]),
        ("turkish", ["istanbul", "été"]),
    ]
    assert [(row[0], sorted(row[1]), row[2]) for row in chunks] == [
        ("greek#0", ["οδοσ"], False),
        ("plain#0", ["ops"], True),
        ("turkish#0", ["istanbul", "été"], False),
    ]
    assert [row[0] for row in queued] == ["greek", "turkish"]  # the lexical index's keys are written again
    assert asyncio.run(_ids_tagged(url, "İstanbul")) == (["turkish#0"], ["turkish"])
    assert asyncio.run(_ids_tagged(url, "ISTANBUL")) == (["turkish#0"], ["turkish"])
    assert asyncio.run(_ids_tagged(url, "ΟΔΟΣ")) == (["greek#0"], ["greek"])


def test_migration_0010_raises_each_projects_generation_to_its_highest_document_version(
    postgres_url: str, unique_name: str
) -> None:
    url = asyncio.run(_create_database(postgres_url, unique_name))
    config = alembic_config(url, embedding_dimensions=384)
    command.upgrade(config, "0009")
    # Versions as the release before drew them, from one sequence for every project.
    document = "INSERT INTO documents (project_id, document_id, source, title, content_hash, version) VALUES "
    asyncio.run(
        _execute(
            url,
            document + "('behind', 'a', 's', 't', 'h', 40), ('behind', 'b', 's', 't', 'h', 57)",
            document + "('ahead', 'a', 's', 't', 'h', 12)",
            document + "('unbumped', 'a', 's', 't', 'h', 33)",
            "INSERT INTO project_generations (project_id, generation) VALUES ('behind', 3), ('ahead', 90)",
        )
    )

    command.upgrade(config, "head")

    (generations,) = asyncio.run(_execute(url, "SELECT project_id, generation FROM project_generations ORDER BY 1"))
    assert generations == [("ahead", 90), ("behind", 57), ("unbumped", 33)]


def test_a_database_a_newer_release_migrated_is_refused_in_one_line_and_left_alone(
    postgres_url: str, unique_name: str
) -> None:
    url = asyncio.run(_create_database(postgres_url, unique_name))
    run_migrations(url, embedding_dimensions=384)
    asyncio.run(_execute(url, "UPDATE alembic_version SET version_num = '9999'"))  # a later release's head

    with pytest.raises(ConfigurationError) as refused:
        run_migrations(url, embedding_dimensions=384)

    message = str(refused.value)
    assert "\n" not in message
    assert "schema is at revision 9999, which this release does not know" in message
    assert "never downgraded" in message
    assert asyncio.run(_execute(url, "SELECT version_num FROM alembic_version")) == [[("9999",)]]


async def _schema_revision_seen_by(url: str) -> bool:
    engine = create_async_engine(url)
    try:
        return await check_schema_revision(engine)
    finally:
        await engine.dispose()


def test_a_service_on_an_external_database_refuses_an_older_schema_and_serves_a_newer_one_with_a_warning(
    postgres_url: str, unique_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    url = asyncio.run(_create_database(postgres_url, unique_name))
    head = ScriptDirectory.from_config(alembic_config(url, embedding_dimensions=384)).get_current_head()

    assert asyncio.run(_schema_revision_seen_by(url)) is False  # not migrated yet: a first install, not refused

    run_migrations(url, embedding_dimensions=384)
    assert asyncio.run(_schema_revision_seen_by(url)) is True

    asyncio.run(_execute(url, "UPDATE alembic_version SET version_num = '0007'"))  # an older release migrated it
    with pytest.raises(ConfigurationError) as older:
        asyncio.run(_schema_revision_seen_by(url))
    assert str(older.value).startswith(f"the database's schema is at revision 0007 and this release needs {head}: ")

    asyncio.run(_execute(url, "UPDATE alembic_version SET version_num = '9999'"))  # a newer release: a rollback
    with caplog.at_level(logging.WARNING, logger="app.engines.migrate"):
        assert asyncio.run(_schema_revision_seen_by(url)) is True
    assert [record.getMessage()[:70] for record in caplog.records] == [
        f"the database's schema is at revision 9999, newer than this release's {head}"[:70]
    ]


async def test_the_runtime_role_reads_the_schema_revision_and_one_without_the_grant_is_not_refused(
    postgres_url: str, unique_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    url = await _create_database(postgres_url, unique_name)
    await asyncio.to_thread(run_migrations, url, embedding_dimensions=384)
    runtime_url = await ensure_runtime_role(url)
    await _execute(url, "UPDATE alembic_version SET version_num = '0007'")

    with pytest.raises(ConfigurationError, match="schema is at revision 0007 and this release needs"):
        await _schema_revision_seen_by(runtime_url)  # the runtime role reads the revision

    await _execute(url, f"REVOKE SELECT ON alembic_version FROM {RUNTIME_ROLE}")  # noqa: S608 - a constant role name
    with caplog.at_level(logging.WARNING, logger="app.engines.migrate"):
        assert await _schema_revision_seen_by(runtime_url) is True  # a schema it cannot date is served as before
    assert "this role may not read alembic_version" in caplog.text

    await _execute(url, "INSERT INTO alembic_version VALUES ('0008')")
    with pytest.raises(ConfigurationError, match=r"alembic_version holds 2 revisions \(0007, 0008\)"):
        await _schema_revision_seen_by(url)
