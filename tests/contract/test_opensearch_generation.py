"""A lost or replaced OpenSearch index under a running adapter: detected, recreated with its mapping, refilled.

Run on both OpenSearch-API servers of the contract tier (`osmem-server`, `noida-db`). Losing the index is
real: the concrete index is deleted on the server, as a node replaced empty or a hand-made delete does.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

import pytest
from opensearchpy import AsyncOpenSearch

from app.domain.errors import EngineUnavailableError
from app.domain.models import Filters, LexicalQuery
from app.engines.opensearch import OpenSearchLexicalIndex
from app.engines.opensearch_lifecycle import ensure_index
from app.engines.opensearch_mapping import SCHEMA_VERSION, versioned_index_name
from tests.contract.lexical_index import PROJECT, documents_of, make_chunk, search_ids

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

pytestmark = pytest.mark.opensearch


class Refills:
    """Counts the adapter's refill calls (the wiring queues every project there)."""

    def __init__(self) -> None:
        self.calls = 0

    async def __call__(self) -> None:
        self.calls += 1


@pytest.fixture(params=["osmem", "noida"])
async def client(request: pytest.FixtureRequest) -> AsyncIterator[AsyncOpenSearch]:
    url = request.getfixturevalue("opensearch_url" if request.param == "osmem" else "noida_url")
    opened = AsyncOpenSearch(hosts=[url], timeout=30)
    yield opened
    await opened.close()


@pytest.fixture
async def alias(client: AsyncOpenSearch, unique_name: str) -> AsyncIterator[str]:
    name = f"poimen-gen-{unique_name.replace('_', '-').replace('[', '-').replace(']', '')}"
    await ensure_index(client, alias=name, shards=1, replicas=0)
    yield name
    with contextlib.suppress(Exception):
        await client.indices.delete(index=versioned_index_name(name))


def adapter(client: AsyncOpenSearch, alias: str, refills: Refills) -> OpenSearchLexicalIndex:
    return OpenSearchLexicalIndex(client, index=alias, timeout_s=30.0, shards=1, replicas=0, refill=refills)


async def write(index: OpenSearchLexicalIndex, chunk_id: str, text: str) -> None:
    await index.replace_documents(documents_of([make_chunk(chunk_id, text, document_id=chunk_id)]))


async def test_a_lost_index_is_unready_then_recreated_with_its_mapping_and_refilled_once(
    client: AsyncOpenSearch, alias: str
) -> None:
    refills = Refills()
    index = adapter(client, alias, refills)
    await write(index, "before", "quartz before the loss")
    await client.indices.delete(index=versioned_index_name(alias))

    with pytest.raises(EngineUnavailableError):
        await index.ping()
    with pytest.raises(EngineUnavailableError):
        await index.search(LexicalQuery("quartz"), top_k=5, filters=Filters(PROJECT))
    await write(index, "after", "quartz after the loss")
    await write(index, "later", "quartz later still")

    assert refills.calls == 1
    assert index.generation.refills == 1
    assert not index.generation.alias_missing
    assert sorted(await client.indices.get_alias(name=alias)) == [versioned_index_name(alias)]
    mapping = await client.indices.get_mapping(index=versioned_index_name(alias))
    assert mapping[versioned_index_name(alias)]["mappings"]["_meta"]["schema_version"] == SCHEMA_VERSION
    # The refill (here only counted) brings "before" back; the writes after the loss are there.
    assert sorted(await search_ids(index, "quartz")) == ["after", "later"]
    await index.ping()


async def test_an_index_another_replica_recreated_is_refilled_by_this_one_too(
    client: AsyncOpenSearch, alias: str
) -> None:
    refills = Refills()
    index = adapter(client, alias, refills)
    await write(index, "first", "basalt first")
    await client.indices.delete(index=versioned_index_name(alias))
    await ensure_index(client, alias=alias, shards=1, replicas=0)  # another replica got there first

    await write(index, "second", "basalt second")

    assert refills.calls == 1
    assert await search_ids(index, "basalt") == ["second"]


async def test_replicas_noticing_a_lost_index_at_once_each_refill_once_and_share_one_index(
    client: AsyncOpenSearch, alias: str
) -> None:
    refills = [Refills() for _ in range(3)]
    replicas = [adapter(client, alias, counter) for counter in refills]
    for number, replica in enumerate(replicas):
        await write(replica, f"seen-{number}", "granite seen")
    await client.indices.delete(index=versioned_index_name(alias))

    await asyncio.gather(*(write(replica, f"back-{n}", "granite back") for n, replica in enumerate(replicas)))

    assert [counter.calls for counter in refills] == [1, 1, 1]
    assert sorted(await client.indices.get_alias(name=alias)) == [versioned_index_name(alias)]
    assert sorted(await search_ids(replicas[0], "granite")) == ["back-0", "back-1", "back-2"]


async def test_an_unchanged_index_is_never_refilled(client: AsyncOpenSearch, alias: str) -> None:
    refills = Refills()
    index = adapter(client, alias, refills)

    for number in range(3):
        await write(index, f"steady-{number}", "marble steady")
    await index.replace_documents([])

    assert refills.calls == 0
