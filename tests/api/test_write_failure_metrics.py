"""Writes refused because PostgreSQL is down show in `poimen_engine_errors_total`, as failed searches do.

A dedicated PostgreSQL is really stopped under the running app (nothing patched). The outbox worker also
counts its own failures against `postgres` (`arm="none"`), so here it is left asleep: its idle wait is longer
than the test, and a refused write queues nothing that would wake it.
"""

from __future__ import annotations

import asyncio

import pytest

from tests.api.test_fallbacks import DOCUMENTS, dedicated_postgres, running_app  # noqa: F401 - fixture
from tests.ops.conftest import sample

IDLE_OUTBOX_S = 3600.0


@pytest.mark.slow  # starts and stops a PostgreSQL of its own
async def test_writes_refused_by_a_stopped_postgres_count_as_postgres_engine_errors(
    dedicated_postgres,  # noqa: F811 - the imported fixture
    embedder,
    tmp_path,
) -> None:
    server, url = dedicated_postgres
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
