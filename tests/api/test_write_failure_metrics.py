"""Write-path failures on the metrics: writes PostgreSQL refused, and writes the lexical leg cannot take.

Engines are really stopped under the running app (nothing patched), on a PostgreSQL of the test's own.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from app.wiring.services import BACKLOG_REFRESH_S
from tests.api.test_fallbacks import DOCUMENTS, dedicated_postgres, running_app  # noqa: F401 - fixture
from tests.ops.conftest import sample

IDLE_OUTBOX_S = 3600.0
GAUGE_WAIT_S = 15.0  # three refreshes of the outbox gauges (app/wiring/services.py, every 5 s)


@pytest.mark.slow  # starts and stops a PostgreSQL of its own
async def test_writes_refused_by_a_stopped_postgres_count_as_postgres_engine_errors(
    dedicated_postgres,  # noqa: F811 - the imported fixture
    embedder,
    tmp_path,
) -> None:
    server, url = dedicated_postgres
    # The outbox worker counts its own failures as postgres/none too: left asleep (its idle wait is longer
    # than the test, and a refused write queues nothing that would wake it), it counts none here.
    async with running_app(url, tmp_path, embedder, outbox_poll_interval_s=IDLE_OUTBOX_S) as (client, _):
        project = client.project
        before = sample("poimen_engine_errors_total", engine="postgres", arm="none")

        await asyncio.to_thread(server.stop)
        ingest = await client.post(
            f"/v1/projects/{project}/documents", json={"id": "later", "text": "# Later\n\nWritten later."}
        )
        delete = await client.delete(f"/v1/projects/{project}/documents/{DOCUMENTS[0]['id']}")
        reindex = await client.post(f"/v1/projects/{project}/reindex")
        after = sample("poimen_engine_errors_total", engine="postgres", arm="none")

    assert [response.status_code for response in (ingest, delete, reindex)] == [503, 503, 503]
    assert {response.json()["engine"] for response in (ingest, delete, reindex)} == {"postgres"}
    assert after == before + 3


async def outbox_gauges_once(condition) -> tuple[float, float]:
    """(backlog, oldest age in s) as exported, once `condition(backlog, age)` holds; refreshed every 5 s."""
    deadline = asyncio.get_running_loop().time() + GAUGE_WAIT_S
    while True:
        gauges = sample("poimen_lexical_outbox_backlog"), sample("poimen_lexical_outbox_oldest_age_seconds")
        if condition(*gauges) or asyncio.get_running_loop().time() > deadline:
            return gauges
        await asyncio.sleep(0.1)


@pytest.mark.slow  # a PostgreSQL of its own: its outbox holds this test's documents only
async def test_writes_the_lexical_leg_cannot_take_grow_the_outbox_backlog_and_age_gauges(
    dedicated_postgres,  # noqa: F811 - the imported fixture
    embedder,
    tmp_path,
) -> None:
    _, url = dedicated_postgres
    async with running_app(url, tmp_path, embedder) as (client, engines):
        drained = await outbox_gauges_once(lambda backlog, _: backlog == 0)
        errors_before = sample("poimen_engine_errors_total", engine="tantivy", arm="none")

        await engines.lexical.close()  # the lexical leg goes down; PostgreSQL still takes writes
        written = await client.post(
            f"/v1/projects/{client.project}/documents", json={"id": "later", "text": "# Later\n\nWritten later."}
        )
        first = await outbox_gauges_once(lambda backlog, _: backlog == 1)
        later = await outbox_gauges_once(lambda backlog, age: backlog == 1 and age > first[1])
        errors_after = sample("poimen_engine_errors_total", engine="tantivy", arm="none")

    assert drained == (0.0, 0.0)
    assert written.status_code == 201, written.text
    assert first[0] == 1
    assert later[0] == 1
    assert later[1] > first[1]  # the age the PoimenLexicalOutboxLagging alert reads keeps growing
    assert errors_after > errors_before  # each failed outbox cycle, as engine=tantivy, arm=none


def backlog_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "poimen.wiring" and "outbox backlog" in r.getMessage()]


@pytest.mark.slow  # stops a PostgreSQL of its own, and waits out two refreshes of the outbox gauges
async def test_a_stopped_postgres_is_one_backlog_gauge_line_not_one_per_refresh(
    dedicated_postgres,  # noqa: F811 - the imported fixture
    embedder,
    tmp_path,
    caplog,
) -> None:
    caplog.set_level(logging.INFO, logger="poimen.wiring")
    server, url = dedicated_postgres
    async with running_app(url, tmp_path, embedder, outbox_poll_interval_s=IDLE_OUTBOX_S) as _:
        await asyncio.to_thread(server.stop)
        deadline = asyncio.get_running_loop().time() + GAUGE_WAIT_S
        while not backlog_lines(caplog) and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.1)
        await asyncio.sleep(BACKLOG_REFRESH_S + 1.0)  # one more refresh, failing as well
        during = backlog_lines(caplog)
        await asyncio.to_thread(server.start)
        deadline = asyncio.get_running_loop().time() + GAUGE_WAIT_S
        while len(backlog_lines(caplog)) < 2 and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.1)

    assert len(during) == 1, during
    assert during[0].startswith("outbox backlog unavailable")
    assert backlog_lines(caplog)[1:] == ["outbox backlog readable again: 0 documents queued"]
