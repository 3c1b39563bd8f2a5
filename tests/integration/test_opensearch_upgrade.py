"""Upgrading from the one shared OpenSearch index (schema 6) to an index per project, with real processes.

`poimen serve` on its own PostgreSQL and osmem-server: the first start that finds the base alias still on a
shared index queues every project from PostgreSQL into its own index and retires the shared one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import httpx
import pytest
from opensearchpy import OpenSearch
from osmem_server import OsmemServer

from app.engines.opensearch_mapping import index_body, versioned_index_name
from app.engines.opensearch_projects import project_alias
from tests.contract.opensearch_servers import stop_osmem
from tests.integration.test_durability import unique_word
from tests.integration.test_faults import (
    OPENSEARCH_INDEX,
    dedicated_postgres,
    fault_root,  # noqa: F401 - the fixture, used by name
    search,
    short_document,
    start_service,
    wait_drained,
)

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PROJECTS = ("upgrade-a", "Upgrade-B")
DOCUMENTS_PER_PROJECT = 10
SHARED_SCHEMA_VERSION = 6


def make_it_schema_6(opensearch_url: str) -> str:
    """Replace the project indexes by what schema 6 had: one index behind the base alias. Its name."""
    client = OpenSearch(hosts=[opensearch_url])
    try:
        for project_id in PROJECTS:
            client.indices.delete(
                index=",".join(client.indices.get_alias(name=project_alias(OPENSEARCH_INDEX, project_id)))
            )
        body = index_body(shards=1, replicas=0)
        body["mappings"]["_meta"] = {"schema_version": SHARED_SCHEMA_VERSION}
        shared = versioned_index_name(OPENSEARCH_INDEX, SHARED_SCHEMA_VERSION)
        client.indices.create(index=shared, body=body | {"aliases": {OPENSEARCH_INDEX: {}}})
    finally:
        client.close()
    return shared


async def lexically_found(service_url: str, project_id: str, offset: int) -> list[str]:
    """The documents of the project whose unique word a lexical search ranks first, undegraded."""
    found = []
    async with httpx.AsyncClient(base_url=service_url, timeout=60.0) as client:
        for number in range(offset, offset + DOCUMENTS_PER_PROJECT):
            response = await search(client, project_id, unique_word(number), "lexical")
            body = response.json()
            if response.status_code == 200 and not body["degraded"] and body["results"]:
                found.append(body["results"][0]["document_id"])
    return found


async def test_the_first_start_after_the_shared_index_rebuilds_every_project_into_its_own(
    fault_root: Path,  # noqa: F811 - the fixture imported above
) -> None:
    osmem = OsmemServer.start(japanese=False, addr="127.0.0.1:0")
    try:
        with dedicated_postgres(fault_root) as (_, postgres_url):
            service = start_service(fault_root, "before", DATABASE_URL=postgres_url, OPENSEARCH_URL=osmem.url)
            try:
                async with httpx.AsyncClient(base_url=service.url, timeout=60.0) as client:
                    for offset, project_id in enumerate(PROJECTS):
                        first = offset * DOCUMENTS_PER_PROJECT
                        batch = [short_document(n) for n in range(first, first + DOCUMENTS_PER_PROJECT)]
                        response = await client.post(f"/v1/projects/{project_id}/documents", json={"documents": batch})
                        assert response.status_code == 201, response.text
                        await wait_drained(client, project_id, DOCUMENTS_PER_PROJECT)
            finally:
                service.stop()
            shared = make_it_schema_6(osmem.url)

            service = start_service(fault_root, "after", DATABASE_URL=postgres_url, OPENSEARCH_URL=osmem.url)
            try:
                async with httpx.AsyncClient(base_url=service.url, timeout=60.0) as client:
                    for project_id in PROJECTS:
                        await wait_drained(client, project_id, DOCUMENTS_PER_PROJECT)
                found = {
                    project_id: await lexically_found(service.url, project_id, offset * DOCUMENTS_PER_PROJECT)
                    for offset, project_id in enumerate(PROJECTS)
                }
                log = service.log_path.read_text(errors="replace")
            finally:
                service.stop()
        opensearch = OpenSearch(hosts=[osmem.url])
        try:
            shared_alias_left = opensearch.indices.exists_alias(name=OPENSEARCH_INDEX)
            shared_kept = opensearch.indices.exists(index=shared)
            own = {p: sorted(opensearch.indices.get_alias(name=project_alias(OPENSEARCH_INDEX, p))) for p in PROJECTS}
        finally:
            opensearch.close()
    finally:
        stop_osmem(osmem)

    assert found == {
        project_id: [f"doc-{n}" for n in range(offset * DOCUMENTS_PER_PROJECT, (offset + 1) * DOCUMENTS_PER_PROJECT)]
        for offset, project_id in enumerate(PROJECTS)
    }
    assert own == {p: [versioned_index_name(project_alias(OPENSEARCH_INDEX, p))] for p in PROJECTS}
    assert not shared_alias_left
    assert shared_kept  # for a rollback
    assert "opensearch shared index poimen-faults retired: 2 projects queued" in log
