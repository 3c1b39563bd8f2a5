"""Fault injection with real processes: an engine stopped under load and brought back, the service never restarted.

Each test starts `poimen serve` (this checkout's code: `python -m app` with `PYTHONPATH` on it) against
engines the test owns, stops one engine mid-traffic, records every status code the clients saw during
the outage, starts the engine again and asserts exact counts: acknowledged, indexed, lost = 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
import tantivy
from opensearchpy import OpenSearch
from osmem_server import OsmemServer

from app.api.operator_routes import READINESS_CACHE_S
from app.engines.embedded_postgres import EmbeddedPostgres
from app.engines.migrate import run_migrations
from app.engines.opensearch_mapping import versioned_index_name
from app.engines.opensearch_projects import project_alias
from app.engines.tantivy_folders import project_folder
from app.engines.tantivy_schema import PAYLOAD, decode_chunk
from tests.contract.opensearch_servers import stop_osmem
from tests.integration.conftest import ServiceProcess, cli_environment, free_port
from tests.integration.test_durability import unique_word

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CHECKOUT = Path(__file__).resolve().parents[2]
OPENSEARCH_INDEX = "poimen-faults"
DOCUMENTS = 1_000
BATCH_DOCUMENTS = 100
BATCHES_BEFORE_OUTAGE = 3
DRAIN_TIMEOUT_S = 45.0
RECOVERY_TIMEOUT_S = 30.0
OUTBOX_BATCH_DOCUMENTS = 50


def start_service(root: Path, name: str, **overrides: str) -> ServiceProcess:
    """`python -m app serve` of this checkout on a free port, its data folder and log under `root`; waited for."""
    data_dir = root / name / "data"
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    port = free_port()
    defaults = {
        "PYTHONPATH": str(CHECKOUT),
        "OPENSEARCH_INDEX": OPENSEARCH_INDEX,
        "OPENSEARCH_SHARDS": "1",
        "OPENSEARCH_REPLICAS": "0",
        "OPENSEARCH_TIMEOUT_S": "2",
        "QUERY_CACHE_TTL_SECS": "0",  # every search during the outage is computed live
        "OUTBOX_MAX_BACKOFF_S": "0.5",
        # osmem's delete_by_query scans linearly: the 200 clauses of a default batch take 1.2 s on a quiet
        # core and pass OPENSEARCH_TIMEOUT_S on a busy one, so the backlog after an outage never drained.
        "OUTBOX_BATCH_SIZE": str(OUTBOX_BATCH_DOCUMENTS),
    }
    environment = cli_environment(data_dir, **(defaults | overrides))
    log_path = root / f"{name}.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "app", "serve", "--host", "127.0.0.1", "--port", str(port)],
            cwd=data_dir.parent,  # not the checkout: its .env must not leak into the run
            env=environment,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    service = ServiceProcess(process=process, url=f"http://127.0.0.1:{port}", log_path=log_path)
    service.wait_ready()
    return service


@pytest.fixture
def fault_root() -> Iterator[Path]:
    """A folder outside pytest's 0700 temp root, so a PostgreSQL run as `pgserver` can reach its data."""
    path = Path(tempfile.mkdtemp(prefix="poimen-faults-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def short_document(number: int) -> dict[str, Any]:
    return {
        "id": f"doc-{number}",
        "title": f"Note {number}",
        "text": f"Note {number}: the {unique_word(number)} valve.",
    }


async def search(client: httpx.AsyncClient, project: str, query: str, strategy: str) -> httpx.Response:
    return await client.post("/v1/search", json={"query": query, "project": project, "strategy": strategy, "limit": 5})


async def readiness(client: httpx.AsyncClient) -> tuple[int, str]:
    """`/readyz`'s status code and `status` once the cached answer has expired."""
    await asyncio.sleep(READINESS_CACHE_S + 0.1)
    response = await client.get("/readyz")
    return response.status_code, response.json()["status"]


async def wait_drained(
    client: httpx.AsyncClient, project: str, documents: int, timeout_s: float = DRAIN_TIMEOUT_S
) -> dict[str, Any]:
    """The project's stats once PostgreSQL holds `documents` and none awaits lexical indexing."""
    deadline = time.monotonic() + timeout_s
    stats: dict[str, Any] = {}
    while time.monotonic() < deadline:
        stats = (await client.get(f"/v1/projects/{project}/")).json()
        if stats["documents"] == documents and stats["pending"] == 0:
            return stats
        await asyncio.sleep(0.2)
    pytest.fail(f"outbox not drained within {timeout_s} s: {stats}")


def alias_targets(opensearch_url: str, project: str) -> list[str]:
    """The concrete indexes the project's alias leads to (a concrete index squatting its name would fail the call)."""
    client = OpenSearch(hosts=[opensearch_url])
    try:
        return sorted(client.indices.get_alias(name=project_alias(OPENSEARCH_INDEX, project)))
    finally:
        client.close()


def lexical_chunks_per_document(opensearch_url: str, project: str) -> Counter[str]:
    """How many chunks the lexical index holds per document of `project`, read from OpenSearch itself."""
    client = OpenSearch(hosts=[opensearch_url])
    try:
        client.indices.refresh(index=project_alias(OPENSEARCH_INDEX, project))
        response = client.search(
            index=project_alias(OPENSEARCH_INDEX, project),
            body={"query": {"term": {"project_id": project}}, "_source": ["document_id"], "size": 5 * DOCUMENTS},
        )
    finally:
        client.close()
    return Counter(hit["_source"]["document_id"] for hit in response["hits"]["hits"])


@pytest.mark.parametrize("outage", ["frozen", "replaced_empty"])
async def test_lexical_engine_stopped_mid_ingest_loses_nothing_acknowledged(outage: str, fault_root: Path) -> None:
    """`frozen`: the engine process SIGSTOPped (a hung node: connections accepted, nothing answered) and
    SIGCONTinued. `replaced_empty`: the engine closed and a fresh, empty one started on the same port; the
    service recreates the index with its mapping and queues every project again (the first 300 documents
    were indexed before the outage and must come back too).

    A PostgreSQL of its own: the refill queues every project the store holds, other tests' included."""
    with dedicated_postgres(fault_root) as (_, postgres_url):
        await lexical_outage_timeline(outage, postgres_url, fault_root)


@dataclass
class OutageRecord:
    """What the clients saw while ingesting 10 batches of 100 across an outage that starts before batch 4."""

    acknowledged: list[str] = field(default_factory=list)
    ingest_statuses: Counter[int] = field(default_factory=Counter)
    search_statuses: Counter[int] = field(default_factory=Counter)
    reasons: Counter[str] = field(default_factory=Counter)
    ready_during: tuple[int, str] = (0, "")

    @property
    def searches_during(self) -> int:
        return 2 * (DOCUMENTS // BATCH_DOCUMENTS - BATCHES_BEFORE_OUTAGE)


async def ingest_across_outage(
    client: httpx.AsyncClient, project: str, start_outage: Callable[[], object]
) -> OutageRecord:
    """Ingest `DOCUMENTS` in batches; `start_outage` before batch `BATCHES_BEFORE_OUTAGE`, then search after each.

    Every search during the outage must answer 200 `degraded` from the semantic leg alone.
    """
    record = OutageRecord()
    for index in range(DOCUMENTS // BATCH_DOCUMENTS):
        batch = outage_batch(index * BATCH_DOCUMENTS, BATCH_DOCUMENTS)
        if index == BATCHES_BEFORE_OUTAGE:
            start_outage()
            record.ready_during = await readiness(client)
        response = await client.post(f"/v1/projects/{project}/documents", json={"documents": batch})
        record.ingest_statuses[response.status_code] += 1
        if response.status_code in {200, 201}:  # 200: an update of a document written before
            record.acknowledged.extend(document["id"] for document in batch)
        if index >= BATCHES_BEFORE_OUTAGE:
            for strategy in ("hybrid", "lexical"):
                found = await search(client, project, unique_word(index * BATCH_DOCUMENTS), strategy)
                record.search_statuses[found.status_code] += 1
                body = found.json()
                record.reasons.update(body.get("degraded_reasons", []))
                assert found.status_code == 200, found.text
                assert body["degraded"] is True
                # Only the semantic leg answered: a made-up word has no meaning to rank by.
                assert body["results"]
                assert all(hit["lexical_score"] is None for hit in body["results"])
    return record


async def lexically_missed(client: httpx.AsyncClient, project: str) -> list[tuple[int, int, Any]]:
    """The documents whose unique word a lexical search does not rank first, undegraded."""
    missed = []
    for number in range(DOCUMENTS):
        found = await search(client, project, unique_word(number), "lexical")
        body = found.json()
        if found.status_code != 200 or body["degraded"] or body["results"][0]["document_id"] != f"doc-{number}":
            missed.append((number, found.status_code, body.get("degraded_reasons")))
    return missed


async def lexical_outage_timeline(outage: str, postgres_url: str, root: Path) -> None:
    address = f"127.0.0.1:{free_port()}"
    osmem = OsmemServer.start(japanese=False, addr=address)
    project = f"faults-{uuid.uuid4().hex[:8]}"
    service = start_service(root, "lexical", DATABASE_URL=postgres_url, OPENSEARCH_URL=osmem.url)
    try:
        async with httpx.AsyncClient(base_url=service.url, timeout=60.0) as client:
            if outage == "frozen":
                record = await ingest_across_outage(client, project, lambda: os.kill(osmem.pid, signal.SIGSTOP))
                os.kill(osmem.pid, signal.SIGCONT)
            else:
                record = await ingest_across_outage(client, project, lambda: stop_osmem(osmem))
                osmem = OsmemServer.start(japanese=False, addr=address)  # same port, empty: a node replaced
            stats = await wait_drained(client, project, DOCUMENTS)
            ready_after = await readiness(client)
            chunks = lexical_chunks_per_document(osmem.url, project)
            targets = alias_targets(osmem.url, project)
            missed = await lexically_missed(client, project)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(osmem.pid, signal.SIGCONT)
        service.stop()
        stop_osmem(osmem)

    # The project's index, recreated with its mapping, behind its alias.
    assert targets == [versioned_index_name(project_alias(OPENSEARCH_INDEX, project))]
    lost = [document_id for document_id in record.acknowledged if chunks.get(document_id) != 1]
    assert record.ingest_statuses == {201: DOCUMENTS // BATCH_DOCUMENTS}, service.log_tail()
    assert len(record.acknowledged) == DOCUMENTS
    assert stats["documents"] == DOCUMENTS
    assert stats["lexically_indexed"] == DOCUMENTS  # one chunk per document
    assert sum(chunks.values()) == DOCUMENTS
    assert lost == []
    assert missed == []
    assert record.ready_during == (200, "degraded")  # the semantic leg answers: the pod stays in service
    assert ready_after == (200, "ready")
    assert record.search_statuses == {200: record.searches_during}
    if outage == "frozen":  # a hung engine misses the lexical leg's deadline
        assert record.reasons == {"lexical_timeout": record.searches_during}
    else:  # a closed engine refuses connections
        assert record.reasons == {"lexical_unavailable": record.searches_during}


async def test_embedded_lexical_folder_taken_away_mid_ingest_loses_nothing_acknowledged(fault_root: Path) -> None:
    """The embedded index's folder renamed away (what a detached or failed volume looks like to the process; a
    permission change would stop nothing, the tests run as root) and put back: the service notices, searches
    degrade to the semantic leg, the outbox keeps every write pending, and drains once the folder is back."""
    project = f"faults-{uuid.uuid4().hex[:8]}"
    service = start_service(fault_root, "tantivy")  # the embedded default: PostgreSQL under the data folder too
    folder = fault_root / "tantivy" / "data" / "lexical"
    detached = folder.with_name("lexical.detached")
    try:
        async with httpx.AsyncClient(base_url=service.url, timeout=60.0) as client:
            record = await ingest_across_outage(client, project, lambda: folder.rename(detached))
            pending_during = (await client.get(f"/v1/projects/{project}/")).json()["pending"]
            recreated_during = folder.exists()
            detached.rename(folder)
            stats = await wait_drained(client, project, DOCUMENTS)
            ready_after = await readiness(client)
            missed = await lexically_missed(client, project)
    finally:
        service.stop()
    chunks = tantivy_chunks_per_document(folder, project)

    lost = [document_id for document_id in record.acknowledged if chunks.get(document_id) != 1]
    assert record.ingest_statuses == {201: DOCUMENTS // BATCH_DOCUMENTS}, service.log_tail()
    assert len(record.acknowledged) == DOCUMENTS
    assert not recreated_during  # nothing wrote a new, empty index in its place
    assert pending_during > 0  # the outage held writes back (the first batches may have been indexed)
    assert stats["documents"] == DOCUMENTS
    assert stats["pending"] == 0
    assert stats["lexically_indexed"] == DOCUMENTS  # one chunk per document
    assert sum(chunks.values()) == DOCUMENTS
    assert lost == []
    assert missed == []
    assert record.ready_during == (200, "degraded")  # the semantic leg answers: the pod stays in service
    assert ready_after == (200, "ready")
    assert record.search_statuses == {200: record.searches_during}
    assert record.reasons == {"lexical_unavailable": record.searches_during}


# With OUTBOX_POLL_INTERVAL_S=0.05 the failure backoff doubles from 0.05 s: the 9th failed retry in a row waits
# 12.8 s (OUTBOX_MAX_BACKOFF_S=600 caps nothing here), well past how long the write after the outage is waited for.
BACKOFF_FAILURES_BEFORE_RETURN = 9
INDEXED_AFTER_RETURN_WITHIN_S = 6.0


@pytest.mark.parametrize("engine", ["tantivy", "opensearch"])
async def test_a_write_after_the_lexical_engine_returns_is_indexed_without_waiting_out_the_backoff(
    engine: str, fault_root: Path
) -> None:
    """The lexical engine away long enough for the outbox's failure backoff to grow, then back: the next write
    ends the backoff and is indexed at once, with what waited during the outage.

    Before, a write woke only an idle worker: after an outage (or a `poimen migrate` on a first install) every
    new write missed the lexical leg for up to OUTBOX_MAX_BACKOFF_S (30 s by default)."""
    project = f"faults-{uuid.uuid4().hex[:8]}"
    backoff = {"OUTBOX_POLL_INTERVAL_S": "0.05", "OUTBOX_MAX_BACKOFF_S": "600"}
    with contextlib.ExitStack() as stack:
        if engine == "tantivy":
            service = start_service(fault_root, "backoff", **backoff)
            folder = fault_root / "backoff" / "data" / "lexical"
            detached = folder.with_name("lexical.detached")
            take_away, bring_back = (lambda: folder.rename(detached)), (lambda: detached.rename(folder))
        else:
            _, postgres_url = stack.enter_context(dedicated_postgres(fault_root))
            address = f"127.0.0.1:{free_port()}"
            engines = [OsmemServer.start(japanese=False, addr=address)]
            stack.callback(lambda: stop_osmem(engines[-1]))
            service = start_service(
                fault_root, "backoff", DATABASE_URL=postgres_url, OPENSEARCH_URL=engines[0].url, **backoff
            )
            take_away = lambda: stop_osmem(engines[-1])  # noqa: E731
            bring_back = lambda: engines.append(OsmemServer.start(japanese=False, addr=address))  # noqa: E731
        stack.callback(service.stop)
        async with httpx.AsyncClient(base_url=service.url, timeout=60.0) as client:
            before = await client.post(f"/v1/projects/{project}/documents", json={"documents": outage_batch(0, 1)})
            await wait_drained(client, project, 1)
            take_away()
            during = await client.post(f"/v1/projects/{project}/documents", json={"documents": outage_batch(1, 1)})
            await wait_logged(service, f"({BACKOFF_FAILURES_BEFORE_RETURN} in a row)")
            bring_back()
            after = await client.post(f"/v1/projects/{project}/documents", json={"documents": outage_batch(2, 1)})
            stats = await wait_drained(client, project, 3, timeout_s=INDEXED_AFTER_RETURN_WITHIN_S)
            found = (await search(client, project, unique_word(2), "lexical")).json()
        log = service.log_path.read_text(errors="replace")

    assert [before.status_code, during.status_code, after.status_code] == [201, 201, 201]
    assert stats["lexically_indexed"] == 3
    assert found["degraded"] is False
    assert found["results"][0]["document_id"] == "doc-2"
    # Indexed by the early retry the write asked for, not by the scheduled one, which never came.
    assert f"({BACKOFF_FAILURES_BEFORE_RETURN + 1} in a row)" not in log


async def wait_logged(service: ServiceProcess, text: str, timeout_s: float = DRAIN_TIMEOUT_S) -> None:
    """Return once the service's log holds `text`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if text in service.log_path.read_text(errors="replace"):
            return
        await asyncio.sleep(0.1)
    pytest.fail(f"{text!r} not logged within {timeout_s} s:\n{service.log_tail()}")


async def test_a_service_started_while_opensearch_is_down_serves_degraded_and_catches_up(fault_root: Path) -> None:
    # It exited at start ("application start-up failed"): every pod a rollout, a drain or the HPA started
    # during an OpenSearch outage crash-looped until it ended.
    address = f"127.0.0.1:{free_port()}"
    project = f"faults-{uuid.uuid4().hex[:8]}"
    osmem: OsmemServer | None = None
    with dedicated_postgres(fault_root) as (_, postgres_url):
        service = start_service(fault_root, "late", DATABASE_URL=postgres_url, OPENSEARCH_URL=f"http://{address}")
        try:
            async with httpx.AsyncClient(base_url=service.url, timeout=60.0) as client:
                ready_before = await readiness(client)
                created = await client.post(f"/v1/projects/{project}/documents", json={"documents": outage_batch(0, 3)})
                during = (await search(client, project, unique_word(1), "hybrid")).json()
                osmem = OsmemServer.start(japanese=False, addr=address)  # the cluster comes up
                stats = await wait_drained(client, project, 3)
                ready_after = await readiness(client)
                lexical = (await search(client, project, unique_word(1), "lexical")).json()
        finally:
            service.stop()
            if osmem is not None:
                stop_osmem(osmem)

    assert ready_before == (200, "degraded")
    assert created.status_code == 201, created.text
    assert during["degraded"] is True
    assert during["results"][0]["document_id"] == "doc-1"  # the semantic leg answers meanwhile
    assert stats["lexically_indexed"] == 3
    assert ready_after == (200, "ready")
    assert lexical["degraded"] is False
    assert lexical["results"][0]["document_id"] == "doc-1"
    assert "opensearch unreachable at start" in service.log_tail(200)


def tantivy_chunks_per_document(folder: Path, project: str) -> Counter[str]:
    """How many chunks the embedded index holds per document of `project`, read from its folder itself."""
    index = tantivy.Index.open(str(project_folder(folder, project)))
    searcher = index.searcher()
    found = searcher.search(tantivy.Query.all_query(), 5 * DOCUMENTS).hits
    chunks = [decode_chunk(searcher.doc(address)[PAYLOAD][0]) for _, address in found]
    return Counter(chunk.document_id for chunk in chunks if chunk.project_id == project)


@contextlib.contextmanager
def dedicated_postgres(root: Path) -> Iterator[tuple[EmbeddedPostgres, str]]:
    """A PostgreSQL of this test's own (stopping it hurts nobody), migrated for the default model."""
    server = EmbeddedPostgres(root / "pg")
    url = server.start()
    try:
        run_migrations(url, embedding_dimensions=384)
        yield server, url
    finally:
        server.stop()


def outage_batch(start: int, count: int) -> list[dict[str, Any]]:
    return [short_document(number) for number in range(start, start + count)]


async def test_postgres_restarted_under_traffic_recovers_without_a_service_restart(fault_root: Path) -> None:
    project = f"faults-{uuid.uuid4().hex[:8]}"
    before, during = outage_batch(0, 20), outage_batch(20, 10)
    search_statuses: Counter[int] = Counter()
    reasons: Counter[str] = Counter()
    retry_after: set[str] = set()
    ingest_statuses: Counter[int] = Counter()
    with dedicated_postgres(fault_root) as (postgres, url):
        osmem = OsmemServer.start(japanese=False, addr="127.0.0.1:0")
        service = start_service(fault_root, "postgres", DATABASE_URL=url, OPENSEARCH_URL=osmem.url)
        try:
            async with httpx.AsyncClient(base_url=service.url, timeout=30.0) as client:
                created = await client.post(f"/v1/projects/{project}/documents", json={"documents": before})
                await wait_drained(client, project, len(before))
                ready_before = await readiness(client)

                await asyncio.to_thread(postgres.stop)
                ready_during = await readiness(client)
                for number in range(len(before)):
                    for strategy in ("hybrid", "semantic"):
                        found = await search(client, project, unique_word(number), strategy)
                        search_statuses[found.status_code] += 1
                        if found.status_code == 200:
                            body = found.json()
                            assert body["degraded"] is True, body
                            reasons.update(body["degraded_reasons"])
                            assert body["results"][0]["document_id"] == f"doc-{number}"  # the lexical leg
                        else:
                            assert found.status_code == 503, found.text
                            assert found.headers["content-type"].startswith("application/problem+json")
                            retry_after.add(found.headers["Retry-After"])
                    refused = await client.post(f"/v1/projects/{project}/documents", json={"documents": during})
                    ingest_statuses[refused.status_code] += 1
                    if refused.status_code == 503:
                        retry_after.add(refused.headers["Retry-After"])

                restarted_url = await asyncio.to_thread(postgres.start)
                search_attempts = ingest_attempts = 0
                deadline = time.monotonic() + RECOVERY_TIMEOUT_S
                recovered_search: dict[str, Any] = {}
                while time.monotonic() < deadline:
                    search_attempts += 1
                    found = await search(client, project, unique_word(3), "hybrid")
                    if found.status_code == 200 and not found.json()["degraded"]:
                        recovered_search = found.json()
                        break
                    await asyncio.sleep(0.5)
                half_written = [
                    document["id"]
                    for document in during
                    if (await client.get(f"/v1/projects/{project}/documents/{document['id']}")).status_code != 404
                ]
                while time.monotonic() < deadline:
                    ingest_attempts += 1
                    accepted = await client.post(f"/v1/projects/{project}/documents", json={"documents": during})
                    if accepted.status_code == 201:
                        break
                    await asyncio.sleep(0.5)
                stats = await wait_drained(client, project, len(before) + len(during))
                ready_after = await readiness(client)
        finally:
            service.stop()
            stop_osmem(osmem)

    assert created.status_code == 201
    assert restarted_url == url
    assert ready_before == (200, "ready")
    assert ready_during == (200, "degraded")  # the lexical leg answers: the pod stays in service
    assert ready_after == (200, "ready")
    # Every search failed over to the lexical leg (a 503 with Retry-After is allowed, none was seen).
    assert search_statuses == {200: 2 * len(before)}
    # ... unchecked against the store that is down, which each answer says.
    assert reasons == {"semantic_unavailable": 2 * len(before), "lexical_unconfirmed": 2 * len(before)}
    assert ingest_statuses == {503: len(before)}
    assert retry_after <= {"1"}
    assert half_written == []  # a refused ingest wrote nothing
    assert recovered_search["results"][0]["document_id"] == "doc-3"
    assert accepted.status_code == 201
    assert search_attempts <= 10
    assert ingest_attempts <= 10
    assert stats["documents"] == len(before) + len(during)
    assert stats["lexically_indexed"] == len(before) + len(during)
