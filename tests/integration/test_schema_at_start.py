"""`poimen serve` on an external database whose schema is not (yet) this release's.

Real processes: `poimen serve` on the session's PostgreSQL (`DATABASE_URL`, a database of its own per
test) with an `osmem-server` (PyPI) as the lexical engine. A first install starts its pods before the
migrations Job runs (the chart's `post-install` hook waits for them), so a database with no schema must
not stop the service; one an older release migrated must, in one line, before it serves anything.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

import httpx
import pytest
from osmem_server import OsmemServer

from app.engines.migrate import run_migrations
from tests.contract.opensearch_servers import stop_osmem
from tests.integration.conftest import ServiceProcess, empty_database, execute_statement, spawn_service

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

pytestmark = [pytest.mark.integration, pytest.mark.slow]

EXIT_TIMEOUT_S = 120.0


@pytest.fixture(scope="module")
def opensearch_server_url() -> Iterator[str]:
    server = OsmemServer.start(japanese=False, addr="127.0.0.1:0")
    try:
        yield server.url
    finally:
        stop_osmem(server)


def _serve(tmp_path: Path, database_url: str, opensearch_url: str, *, index: str, **overrides: str) -> ServiceProcess:
    return spawn_service(
        tmp_path / "data",
        log_path=tmp_path / "serve.log",
        DATABASE_URL=database_url,
        OPENSEARCH_URL=opensearch_url,
        OPENSEARCH_INDEX=index.replace("_", "-"),
        **overrides,
    )


def test_a_first_install_serves_before_its_migrations_and_works_once_they_ran(
    postgres_url: str, opensearch_server_url: str, unique_name: str, tmp_path: Path
) -> None:
    database_url = empty_database(postgres_url, unique_name)
    service = _serve(tmp_path, database_url, opensearch_server_url, index=unique_name)
    try:
        service.wait_ready()
        document = {"id": "note", "text": "# Keys\n\nThe quartz key opens the archive."}
        before = httpx.post(f"{service.url}/v1/projects/alpha/documents", json=document, timeout=30.0)

        run_migrations(database_url, embedding_dimensions=384)  # the Job, after the pods are ready
        after = httpx.post(f"{service.url}/v1/projects/alpha/documents", json=document, timeout=30.0)
        found = httpx.get(
            f"{service.url}/memory/query",
            params={"query": "which key opens the archive", "project": "alpha", "strategy": "semantic"},
            timeout=30.0,
        )
    finally:
        service.stop()

    assert before.status_code == 503, before.text
    assert "no schema yet" in service.log_path.read_text()
    assert after.status_code == 201, after.text
    assert [hit["document_id"] for hit in found.json()["results"]] == ["note"]


def test_the_first_write_after_the_migrations_is_found_lexically_without_waiting_out_the_outbox_backoff(
    postgres_url: str, opensearch_server_url: str, unique_name: str, tmp_path: Path
) -> None:
    # Before the migrations every outbox cycle fails (no table) and the worker backs off, doubling from
    # OUTBOX_POLL_INTERVAL_S: by its 9th failure in a row it waits 12.8 s (OUTBOX_MAX_BACKOFF_S=600 caps nothing
    # here). Before, the first write after `poimen migrate` stayed out of the lexical leg until that wait ended.
    database_url = empty_database(postgres_url, unique_name)
    backoff = {"OUTBOX_POLL_INTERVAL_S": "0.05", "OUTBOX_MAX_BACKOFF_S": "600"}
    service = _serve(tmp_path, database_url, opensearch_server_url, index=unique_name, **backoff)
    try:
        service.wait_ready()
        deadline = time.monotonic() + 60
        while "(9 in a row)" not in service.log_path.read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        run_migrations(database_url, embedding_dimensions=384)
        document = {"id": "note", "text": "# Keys\n\nThe quartz key opens the archive."}
        written = httpx.post(f"{service.url}/v1/projects/alpha/documents", json=document, timeout=30.0)
        found: list[str] = []
        deadline = time.monotonic() + 6.0
        while not found and time.monotonic() < deadline:
            answer = httpx.get(
                f"{service.url}/memory/query",
                params={"query": "quartz", "project": "alpha", "strategy": "lexical"},
                timeout=30.0,
            ).json()
            found = [hit["document_id"] for hit in answer["results"] if not answer["degraded"]]
            time.sleep(0.1)
        log = service.log_path.read_text()
    finally:
        service.stop()

    assert "(9 in a row)" in log
    assert written.status_code == 201, written.text
    assert found == ["note"]
    assert "(10 in a row)" not in log  # indexed by the early retry the write asked for


def test_a_schema_an_older_release_migrated_stops_the_service_in_one_line(
    postgres_url: str, opensearch_server_url: str, unique_name: str, tmp_path: Path
) -> None:
    database_url = empty_database(postgres_url, unique_name)
    run_migrations(database_url, embedding_dimensions=384)
    asyncio.run(execute_statement(database_url, "UPDATE alembic_version SET version_num = '0007'"))
    service = _serve(tmp_path, database_url, opensearch_server_url, index=unique_name)

    try:
        exit_code = service.process.wait(EXIT_TIMEOUT_S)
    finally:
        service.stop()  # a server that did not refuse is still running: never left behind

    refusals = [line for line in service.log_path.read_text().splitlines() if "schema is at revision 0007" in line]
    assert exit_code == 3
    assert len(refusals) == 1
    assert "this release needs" in refusals[0]
    assert "run `poimen migrate` of this release" in refusals[0]
