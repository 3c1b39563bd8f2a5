"""Many replicas, one truth: three `poimen serve` processes on one PostgreSQL and one OpenSearch-API server.

Real processes throughout: the replicas are `poimen serve` subprocesses sharing the session's PostgreSQL
(`DATABASE_URL`) and an `osmem-server` (PyPI) as the lexical engine; one replica is killed with SIGKILL
and started again while eight clients write through random replicas. Afterwards the lexical index must
hold exactly what PostgreSQL holds, chunk by chunk.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import statistics
import subprocess
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from opensearchpy import AsyncOpenSearch
from opensearchpy.exceptions import NotFoundError
from osmem_server import OsmemServer
from sqlalchemy import text

from app.engines.migrate import run_migrations
from app.engines.opensearch_projects import project_alias
from app.engines.pgvector import create_postgres_engine
from tests.contract.opensearch_servers import stop_osmem
from tests.integration.conftest import ServiceProcess, cli_environment, empty_database, free_port, poimen_executable

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterator
    from pathlib import Path

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REPLICAS = 3
CLIENTS = 8
OPERATIONS_PER_CLIENT = 12
DOCUMENT_IDS = [f"memory-{n}" for n in range(12)]  # every client writes and deletes among these
OPENSEARCH_INDEX = "poimen-replicas"
DRAIN_TIMEOUT_S = 90.0
SEED = 20261130


@dataclass
class Replicas:
    """The running replicas (index = replica number) and how to start one again on its port."""

    database_url: str
    opensearch_url: str
    root: Path
    services: list[ServiceProcess] = field(default_factory=list)

    def start(self, number: int, port: int) -> ServiceProcess:
        data_dir = self.root / f"replica-{number}" / "data"
        data_dir.parent.mkdir(parents=True, exist_ok=True)
        environment = cli_environment(
            data_dir,
            DATABASE_URL=self.database_url,
            OPENSEARCH_URL=self.opensearch_url,
            OPENSEARCH_INDEX=OPENSEARCH_INDEX,
            OPENSEARCH_SHARDS="1",
            OPENSEARCH_REPLICAS="0",
            OUTBOX_LEASE_S="3",
            QUERY_CACHE_TTL_SECS="3600",
        )
        log_path = self.root / f"replica-{number}-{int(time.monotonic() * 1000)}.log"
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                [poimen_executable(), "serve", "--host", "127.0.0.1", "--port", str(port)],
                cwd=data_dir.parent,
                env=environment,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        return ServiceProcess(process=process, url=f"http://127.0.0.1:{port}", log_path=log_path)


@pytest.fixture(scope="module")
def replicas(postgres_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Replicas]:
    # A database of its own: the session's holds the contract tests' chunks of another model, which a
    # replica refuses to serve (its start-up compares the stored embedding model with its own).
    database_url = empty_database(postgres_url, "replicas")
    run_migrations(database_url, embedding_dimensions=384)
    server = OsmemServer.start(japanese=False, addr="127.0.0.1:0")
    running = Replicas(database_url, server.url, tmp_path_factory.mktemp("replicas"))
    try:
        running.services = [running.start(number, free_port()) for number in range(REPLICAS)]
        for service in running.services:
            service.wait_ready()
        yield running
    finally:
        for service in running.services:
            service.stop()
        stop_osmem(server)


def document_body(document_id: str, revision: int) -> dict[str, Any]:
    return {
        "id": document_id,
        "source": f"memories/{document_id}.md",
        "title": f"Memory {document_id}",
        "text": f"# Revision {revision}\n\nThe agent noted revision {revision} of {document_id}: "
        f"the quartz{revision} key opens the archive.\n\n## Details\n\nWritten by client for revision {revision}.",
    }


async def test_a_write_through_one_replica_is_read_at_once_through_another(replicas: Replicas) -> None:
    writer, reader = replicas.services[0].url, replicas.services[1].url
    query = {"query": "which key opens the archive", "project": "ryw", "strategy": "semantic", "limit": 5}
    async with httpx.AsyncClient(timeout=30.0) as client:
        before = (await client.get(f"{reader}/memory/query", params=query)).json()
        cached_before = (await client.get(f"{reader}/memory/query", params=query)).json()

        created = await client.post(f"{writer}/v1/projects/ryw/documents", json=document_body("note", 1))
        after_write = (await client.get(f"{reader}/memory/query", params=query)).json()
        changed = await client.post(f"{writer}/v1/projects/ryw/documents", json=document_body("note", 2))
        after_change = (await client.get(f"{reader}/memory/query", params=query)).json()

    assert before["results"] == []
    assert cached_before["cached"] is True  # the reader cached the empty answer ...
    assert created.status_code == 201
    assert after_write["cached"] is False  # ... and never serves it after the other replica's write
    assert [hit["document_id"] for hit in after_write["results"]] == ["note"]
    assert changed.status_code == 200  # an update creates nothing
    assert "quartz2" in " ".join(hit["text"] for hit in after_change["results"])
    assert after_change["cached"] is False


async def test_a_project_deleted_through_one_replica_loses_its_index_and_no_replica_reads_that_as_a_loss(
    replicas: Replicas,
) -> None:
    # Its empty index stayed for ever, a shard each; and deleting it by hand made every replica unready.
    writer, deleter, reader = (service.url for service in replicas.services)
    opensearch = AsyncOpenSearch(hosts=[replicas.opensearch_url])
    query = {"query": "which key opens the archive", "project": "gone", "strategy": "lexical", "limit": 5}
    try:
        async with httpx.AsyncClient(timeout=30.0) as client:
            for number in range(3):
                created = await client.post(f"{writer}/v1/projects/gone/documents", json=document_body(f"n{number}", 1))
                assert created.status_code == 201, created.text
            await wait_for(lambda: opensearch.indices.exists_alias(name=project_alias(OPENSEARCH_INDEX, "gone")))
            found = (await client.get(f"{reader}/memory/query", params=query)).json()  # the reader knows the index

            deleted = await client.delete(f"{deleter}/v1/projects/gone")
            assert deleted.json()["deleted"] == 3
            await wait_for(_not(lambda: opensearch.indices.exists_alias(name=project_alias(OPENSEARCH_INDEX, "gone"))))
            after = [(await client.get(f"{url}/memory/query", params=query)).json() for url in (writer, reader)]
            ready = [(await client.get(f"{url}/readyz")).json()["status"] for url in (writer, deleter, reader)]
    finally:
        await opensearch.close()

    assert [hit["document_id"] for hit in found["results"]][:1] in (["n0"], ["n1"], ["n2"])
    assert [(answer["results"], answer["degraded"]) for answer in after] == [([], False), ([], False)]
    assert ready == ["ready", "ready", "ready"]


def _not(check: Callable[[], Awaitable[bool]]) -> Callable[[], Awaitable[bool]]:
    async def negated() -> bool:
        return not await check()

    return negated


async def wait_for(check: Callable[[], Awaitable[object]], timeout_s: float = DRAIN_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not await check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.1)


@dataclass
class Acknowledged:
    """What the clients were told: every 2xx with when it was asked and answered (monotonic seconds)."""

    ingests: dict[str, list[tuple[int, float, float]]] = field(default_factory=dict)  # id -> (version, start, end)
    deletes: dict[str, list[tuple[float, float]]] = field(default_factory=dict)  # id -> (start, end)
    refused: int = 0


async def client_run(number: int, urls: list[str], acknowledged: Acknowledged) -> None:
    chooser = random.Random(SEED + number)
    async with httpx.AsyncClient(timeout=30.0) as client:
        for operation in range(OPERATIONS_PER_CLIENT):
            url = chooser.choice(urls)
            document_id = chooser.choice(DOCUMENT_IDS)
            started = time.monotonic()
            try:
                if chooser.random() < 0.25:
                    response = await client.delete(f"{url}/v1/projects/chaos/documents/{document_id}")
                    if response.status_code == 204:
                        acknowledged.deletes.setdefault(document_id, []).append((started, time.monotonic()))
                    continue
                body = document_body(document_id, number * 1000 + operation)
                response = await client.post(f"{url}/v1/projects/chaos/documents", json=body)
            except httpx.HTTPError:
                acknowledged.refused += 1  # the killed replica: not acknowledged, so not owed
                continue
            if response.status_code == 201:
                version = response.json()["documents"][0]["version"]
                acknowledged.ingests.setdefault(document_id, []).append((version, started, time.monotonic()))
            else:
                acknowledged.refused += 1


async def outbox_lag_samples(database_url: str, stop: asyncio.Event, samples: list[float]) -> None:
    engine = create_postgres_engine(database_url, pool_size=1)
    try:
        while not stop.is_set():
            async with engine.connect() as connection:
                oldest = "SELECT coalesce(extract(epoch FROM now() - min(queued_at)), 0) FROM lexical_outbox"
                samples.append(float((await connection.execute(text(oldest))).scalar_one()))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=0.1)
    finally:
        await engine.dispose()


async def kill_and_restart(replicas: Replicas, number: int, *, after_s: float) -> None:
    await asyncio.sleep(after_s)
    victim = replicas.services[number]
    victim.kill()
    port = int(victim.url.rsplit(":", 1)[1])
    replacement = replicas.start(number, port)
    replicas.services[number] = replacement
    await asyncio.to_thread(replacement.wait_ready)


async def postgres_chunks(database_url: str) -> tuple[dict[str, set[tuple[str, str]]], int]:
    """PostgreSQL's chunks of the chaos project by document, and the outbox backlog."""
    engine = create_postgres_engine(database_url, pool_size=1)
    try:
        async with engine.connect() as connection:
            rows = (
                await connection.execute(
                    text("SELECT document_id, chunk_id, chunk_hash FROM chunks WHERE project_id = 'chaos'")
                )
            ).all()
            backlog = (await connection.execute(text("SELECT count(*) FROM lexical_outbox"))).scalar_one()
    finally:
        await engine.dispose()
    by_document: dict[str, set[tuple[str, str]]] = {}
    for row in rows:
        by_document.setdefault(row.document_id, set()).add((row.chunk_id, row.chunk_hash))
    return by_document, int(backlog)


async def opensearch_chunks(opensearch_url: str) -> dict[str, set[tuple[str, str]]]:
    client = AsyncOpenSearch(hosts=[opensearch_url])
    try:
        await client.indices.refresh(index=project_alias(OPENSEARCH_INDEX, "chaos"))
        response = await client.search(
            index=project_alias(OPENSEARCH_INDEX, "chaos"),
            body={"size": 10_000, "query": {"term": {"project_id": "chaos"}}},
        )
    except NotFoundError:
        return {}  # every document ended deleted: the project's index went with the last one
    finally:
        await client.close()
    by_document: dict[str, set[tuple[str, str]]] = {}
    for hit in response["hits"]["hits"]:
        source = hit["_source"]
        by_document.setdefault(source["document_id"], set()).add((source["chunk_id"], source["chunk_hash"]))
    return by_document


async def test_many_clients_through_random_replicas_with_one_killed_leave_both_stores_equal(
    replicas: Replicas,
) -> None:
    urls = [service.url for service in replicas.services]
    acknowledged = Acknowledged()
    stop_sampling = asyncio.Event()
    lag: list[float] = []
    sampler = asyncio.create_task(outbox_lag_samples(replicas.database_url, stop_sampling, lag))

    await asyncio.gather(
        *(client_run(number, urls, acknowledged) for number in range(CLIENTS)),
        kill_and_restart(replicas, 2, after_s=1.0),
    )
    deadline = time.monotonic() + DRAIN_TIMEOUT_S
    while (backlog := (await postgres_chunks(replicas.database_url))[1]) and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    stop_sampling.set()
    await sampler
    in_postgres, _ = await postgres_chunks(replicas.database_url)
    in_opensearch = await opensearch_chunks(replicas.opensearch_url)

    assert backlog == 0
    assert sum(len(versions) for versions in acknowledged.ingests.values()) > CLIENTS  # the run did write
    assert in_opensearch == in_postgres  # per document: the same chunk ids with the same hashes
    lost = lost_writes(acknowledged, set(in_postgres), await stored_versions(replicas.database_url))
    assert lost == []
    print(  # noqa: T201 - the note quotes these: outbox lag under this load, sampled every 0.1 s
        json.dumps(
            {
                "acknowledged_ingests": sum(len(v) for v in acknowledged.ingests.values()),
                "acknowledged_deletes": sum(len(v) for v in acknowledged.deletes.values()),
                "not_acknowledged": acknowledged.refused,
                "outbox_lag_p50_s": round(statistics.median(lag), 3),
                "outbox_lag_p95_s": round(statistics.quantiles(lag, n=20)[-1], 3) if len(lag) > 1 else lag[0],
                "lag_samples": len(lag),
            }
        )
    )


async def stored_versions(database_url: str) -> dict[str, int]:
    engine = create_postgres_engine(database_url, pool_size=1)
    try:
        async with engine.connect() as connection:
            rows = (
                await connection.execute(text("SELECT document_id, version FROM documents WHERE project_id = 'chaos'"))
            ).all()
    finally:
        await engine.dispose()
    return {row.document_id: int(row.version) for row in rows}


def lost_writes(acknowledged: Acknowledged, present: set[str], versions: dict[str, int]) -> list[str]:
    """Documents whose last acknowledged write is not what PostgreSQL holds, explained.

    Present: its version is at least the last acknowledged one (a later write that died unanswered
    may have committed). Absent: an acknowledged delete may have been ordered after the last
    acknowledged write (it ended after that write began); otherwise the write was lost.
    """
    lost = []
    for document_id, ingests in acknowledged.ingests.items():
        last_version, last_start, _ = max(ingests)
        if document_id in versions:
            if versions[document_id] < last_version:
                lost.append(f"{document_id}: holds version {versions[document_id]} < acknowledged {last_version}")
        elif not any(end > last_start for _, end in acknowledged.deletes.get(document_id, [])):
            lost.append(f"{document_id}: gone, though no acknowledged delete followed version {last_version}")
    lost.extend(f"{document_id}: chunks without a document" for document_id in present - set(versions))
    return lost
