"""The TTL query cache through the app: hit, miss, expiry, invalidation on ingest, no reuse across projects or grants."""

from __future__ import annotations

import asyncio
import time

import jwt

from tests.ops.conftest import CORPUS, document, wait_indexed

SECRET = "ops-cache-secret-" + "0123456789abcdef" * 3


async def ingest(client, project: str, documents: list[dict], **headers: str) -> None:
    """Ingest and wait for the outbox: its lexical indexing invalidates the project's entries too."""
    response = await client.post(f"/v1/projects/{project}/documents", json={"documents": documents}, headers=headers)
    assert response.status_code == 201, response.text
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
    async with ops_app.client(query_cache_ttl_secs=0.5) as client:
        await ingest(client, unique_name, list(CORPUS))
        first = await search(client, unique_name, "vacuum dead tuples")
        second = await search(client, unique_name, "vacuum dead tuples")
        await asyncio.sleep(0.7)
        expired = await search(client, unique_name, "vacuum dead tuples")

    assert [first["cached"], second["cached"], expired["cached"]] == [False, True, False]


async def test_ingest_into_the_project_invalidates_its_entries_at_once(ops_app, unique_name) -> None:
    async with ops_app.client(query_cache_ttl_secs=3600) as client:
        await ingest(client, unique_name, list(CORPUS))
        before = await search(client, unique_name, "zebra migration season")
        cached = await search(client, unique_name, "zebra migration season")
        started = time.monotonic()
        created = await client.post(
            f"/v1/projects/{unique_name}/documents",
            json=document("zebra", "# Zebras\n\nThe zebra migration season starts when the rains come."),
        )
        after = await search(client, unique_name, "zebra migration season")
        elapsed_s = time.monotonic() - started

    assert created.status_code == 201
    assert cached["cached"] is True
    assert "zebra" not in ids(before)
    assert after["cached"] is False
    assert ids(after)[0] == "zebra"
    assert elapsed_s < 10  # right after the write, not after the hour-long TTL


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
