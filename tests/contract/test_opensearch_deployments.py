"""Two deployments on one OpenSearch cluster, each with its own `OPENSEARCH_INDEX`: neither sees nor touches the other.

Run on both OpenSearch-API servers of the contract tier (`osmem-server` or `OPENSEARCH_URL`, `noida-db`). Each
deployment is an adapter built from `Settings`, as the wiring builds it; the bases are nested (one starts with
the other) because a listing, a prune or an upgrade of the shorter one goes over `<base>-p-*`.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import pytest

from app.config import Settings
from app.domain.models import DocumentChunks, Filters
from app.engines.opensearch import OpenSearchLexicalIndex
from app.engines.opensearch_lifecycle import prepare_project_indexes, retire_shared_index
from app.engines.opensearch_projects import project_aliases_pattern
from tests.contract.lexical_index import Holdings, make_chunk, search_ids
from tests.contract.opensearch_servers import client_of_each_emulator, delete_indexes  # noqa: F401 - the `client` fixture

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from opensearchpy import AsyncOpenSearch

pytestmark = pytest.mark.opensearch

OTHER_DEPLOYMENT_SUFFIXES = ["-staging", "-a", "-v2", "-prod", "-pp", "-p2", ".p", "p"]
"""What a second deployment's `OPENSEARCH_INDEX` adds to the first's (all accepted by `Settings`)."""


@pytest.fixture
async def base(client: AsyncOpenSearch, unique_name: str) -> AsyncIterator[str]:
    """The first deployment's `OPENSEARCH_INDEX`; every index starting with it is deleted afterwards."""
    name = f"poimen-dep{abs(hash(unique_name)) % 100000}"
    yield name
    with contextlib.suppress(Exception):
        await delete_indexes(client, f"{name}*")


def deployment(client: AsyncOpenSearch, opensearch_index: str, holdings: Holdings) -> OpenSearchLexicalIndex:
    """The lexical adapter a deployment configured with `opensearch_index` builds (through `Settings`)."""
    settings = Settings(_env_file=None, opensearch_index=opensearch_index)
    return OpenSearchLexicalIndex(
        client,
        index=settings.opensearch_index,
        timeout_s=30.0,
        replicas=0,
        holds_documents=holdings.holds,
        projects_with_documents=holdings.listed,
    )


async def write(index: OpenSearchLexicalIndex, project_id: str, chunk_id: str, text: str) -> None:
    chunk = make_chunk(chunk_id, text, document_id=chunk_id, project_id=project_id)
    await index.replace_documents([DocumentChunks(project_id, chunk_id, (chunk,), None)])


async def index_generations(client: AsyncOpenSearch, base: str) -> dict[str, str]:
    """Every project index under `base`: its name and `index.uuid` (a deleted or recreated index shows)."""
    listed = await client.indices.get_settings(index=project_aliases_pattern(base))
    return {name: body["settings"]["index"]["uuid"] for name, body in listed.items()}


@pytest.mark.parametrize("suffix", OTHER_DEPLOYMENT_SUFFIXES)
async def test_a_deployment_lists_deletes_prunes_and_upgrades_its_own_project_indexes_only(
    client: AsyncOpenSearch, base: str, suffix: str
) -> None:
    # The other deployment's projects, named so that under the first's base they would be `p-notes`, `notes`.
    other = deployment(client, base + suffix, Holdings("notes", "p-notes"))
    await write(other, "notes", "theirs-1", "quartz of the other deployment")
    await write(other, "p-notes", "theirs-2", "quartz of the other deployment")
    theirs = await index_generations(client, base + suffix)
    mine_holdings = Holdings("mine", "p-notes", "doomed")
    mine = deployment(client, base, mine_holdings)
    await write(mine, "mine", "mine-1", "quartz of this deployment")
    await write(mine, "p-notes", "mine-2", "quartz of this deployment")
    await write(mine, "doomed", "mine-3", "quartz of a project deleted next")

    assert await mine.discover_projects() == 3
    await mine.delete_project("doomed")
    mine_holdings.project_ids.discard("doomed")
    mine_holdings.project_ids.discard("p-notes")  # emptied: its index goes with the next prune
    assert await mine.prune_emptied_projects() == ["p-notes"]
    assert not await prepare_project_indexes(client, base=base, replicas=0)  # what every start runs
    await retire_shared_index(client, base=base)
    await mine.ping()

    assert await index_generations(client, base + suffix) == theirs  # none deleted, recreated or added
    assert await other.discover_projects() == 2
    for project_id, chunk_id in (("notes", "theirs-1"), ("p-notes", "theirs-2")):
        assert await search_ids(other, "quartz", filters=Filters(project_id)) == [chunk_id]
    assert await search_ids(mine, "quartz", filters=Filters("mine")) == ["mine-1"]
    assert await search_ids(mine, "quartz", filters=Filters("notes")) == []
