"""The TTL query cache through the app: hit, miss, expiry, invalidation on ingest, no reuse across projects or grants."""

from __future__ import annotations

import time

import jwt
from sqlalchemy import text

from app.engines.pgvector import create_postgres_engine
from tests.ops.conftest import CORPUS, document, wait_indexed
from tests.unit.test_cache import FakeClock

SECRET = "ops-cache-secret-" + "0123456789abcdef" * 3


async def ingest(client, project: str, documents: list[dict], **headers: str) -> None:
    """Ingest and wait for the outbox: its lexical indexing invalidates the project's entries too."""
    response = await client.post(f"/v1/projects/{project}/documents", json={"documents": documents}, headers=headers)
    assert response.status_code in {200, 201}, response.text  # 200: it created nothing (an update)
    for item in documents:
        await wait_indexed(client, project, item["id"], headers=headers)


async def search(client, project: str, query: str, **headers: str) -> dict:
    response = await client.get("/memory/query", params={"query": query, "project": project}, headers=headers)
    assert response.status_code == 200, response.text
    return response.json()


def ids(body: dict) -> list[str]:
    return [hit["document_id"] for hit in body["results"]]


async def test_a_repeated_query_is_a_miss_then_a_hit_with_the_same_results(ops_app, unique_name) -> None:
    async with ops_app.client() as client:
        await ingest(client, unique_name, list(CORPUS))
        first = await search(client, unique_name, "ttl cache results")
        second = await search(client, unique_name, "  TTL   cache results ")  # normalized to the same key

    assert first["cached"] is False
    assert second["cached"] is True
    assert second["results"] == first["results"]


async def test_an_entry_expires_after_the_ttl(ops_app, unique_name) -> None:
    """The cache's clock moves only when the test moves it: a stalled machine can neither expire nor keep an entry."""
    clock = FakeClock()
    async with ops_app.client(query_cache_ttl_secs=60, query_cache_clock=clock) as client:
        await ingest(client, unique_name, list(CORPUS))
        first = await search(client, unique_name, "vacuum dead tuples")
        clock.now += 59.0  # a second short of the TTL
        before_ttl = await search(client, unique_name, "vacuum dead tuples")
        clock.now += 1.0  # the TTL since the first search cached its answer (reading it did not extend it)
        at_ttl = await search(client, unique_name, "vacuum dead tuples")
        after_ttl = await search(client, unique_name, "vacuum dead tuples")

    assert [first["cached"], before_ttl["cached"], at_ttl["cached"], after_ttl["cached"]] == [False, True, False, True]
    assert at_ttl["results"] == first["results"]


async def test_ingest_into_the_project_invalidates_its_entries_at_once(ops_app, unique_name) -> None:
    async with ops_app.client(query_cache_ttl_secs=3600) as client:
        await ingest(client, unique_name, list(CORPUS))
        before = await search(client, unique_name, "zebra migration season")
        cached = await search(client, unique_name, "zebra migration season")
        created = await client.post(
            f"/v1/projects/{unique_name}/documents",
            json=document("zebra", "# Zebras\n\nThe zebra migration season starts when the rains come."),
        )
        after = await search(client, unique_name, "zebra migration season")

    assert created.status_code == 201
    assert cached["cached"] is True
    assert "zebra" not in ids(before)
    assert after["cached"] is False  # the search right after the write: the hour-long TTL cannot have expired it
    assert ids(after)[0] == "zebra"


async def test_entries_are_never_shared_across_projects(ops_app, unique_name) -> None:
    other = unique_name + "_other"
    async with ops_app.client() as client:
        await ingest(client, unique_name, list(CORPUS))
        await ingest(
            client, other, [document("otter", "# Otters\n\nA TTL cache of river otters keeps results of fishing.")]
        )
        mine = await search(client, unique_name, "ttl cache results")
        theirs = await search(client, other, "ttl cache results")

    assert theirs["cached"] is False
    assert ids(theirs) == ["otter"]
    assert "otter" not in ids(mine)


def token(subject: str, projects: list[str], scope: str) -> str:
    now = int(time.time())
    claims = {"sub": subject, "iat": now, "exp": now + 600, "projects": projects, "scope": scope}
    return "Bearer " + jwt.encode(claims, SECRET, algorithm="HS256")


async def test_entries_are_never_shared_between_callers_with_different_grants(ops_app, unique_name) -> None:
    writer = token("writer", [unique_name], "search ingest")
    reader = token("reader", [unique_name], "search")
    same_grants_as_reader = token("another-reader", [unique_name], "search")
    async with ops_app.client(auth_mode="jwt", jwt_secret=SECRET) as client:
        await ingest(client, unique_name, list(CORPUS), authorization=writer)
        by_writer = await search(client, unique_name, "ttl cache results", authorization=writer)
        by_reader = await search(client, unique_name, "ttl cache results", authorization=reader)
        by_peer = await search(client, unique_name, "ttl cache results", authorization=same_grants_as_reader)

    assert by_writer["cached"] is False
    assert by_reader["cached"] is False  # other grants: its own entry
    assert by_peer["cached"] is True  # equal grants share entries (the key holds grants, never the token)


async def _execute(database_url: str, statement: str, **parameters: object) -> list[tuple[object, ...]]:
    """One statement on the session PostgreSQL (its superuser: past row-level security, as a restore is)."""
    engine = create_postgres_engine(database_url, pool_size=1)
    try:
        async with engine.begin() as connection:
            result = await connection.execute(text(statement), parameters)
            return [tuple(row) for row in result.all()] if result.returns_rows else []
    finally:
        await engine.dispose()


async def test_an_answer_cached_before_postgresql_was_set_back_is_not_served_after_it(ops_app, unique_name) -> None:
    """A restore to an earlier point sets the project's generation back: writes since count up through numbers
    this replica cached answers under, for other content. A search that reads a lower generation empties the cache."""
    url, project = ops_app.database_url, unique_name
    read_state = (
        "SELECT g.generation, d.version FROM project_generations g JOIN documents d USING (project_id) "
        "WHERE project_id = :project"
    )
    alpha, beta, gamma = ("# Vault\n\nThe " + key + " key opens the vault." for key in ("alpha", "beta", "gamma"))
    async with ops_app.client(query_cache_ttl_secs=3600) as client:
        await ingest(client, project, [document("vault", alpha)])
        [(backup_generation, backup_version)] = await _execute(url, read_state, project=project)  # the backup
        await ingest(client, project, [document("vault", beta)])
        [(cached_generation, _)] = await _execute(url, read_state, project=project)
        await search(client, project, "which key opens the vault")
        before_restore = await search(client, project, "which key opens the vault")
        # The restore: the backup's content, and its counters.
        await ingest(client, project, [document("vault", alpha)])
        await _execute(
            url,
            "UPDATE project_generations SET generation = :generation WHERE project_id = :project",
            generation=backup_generation,
            project=project,
        )
        await _execute(
            url,
            "UPDATE documents SET version = :version WHERE project_id = :project",
            version=backup_version,
            project=project,
        )
        restored = await search(client, project, "which key opens the vault")
        await ingest(client, project, [document("vault", gamma)])
        [(generation_now, _)] = await _execute(url, read_state, project=project)
        after_write = await search(client, project, "which key opens the vault")

    assert before_restore["cached"] is True
    assert "beta" in before_restore["results"][0]["text"]
    assert "alpha" in restored["results"][0]["text"]
    assert generation_now == cached_generation  # counted up again to the number the beta answer is cached under
    assert after_write["cached"] is False
    assert "gamma" in after_write["results"][0]["text"]
