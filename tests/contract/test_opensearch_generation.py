"""A lost or replaced project index under a running adapter: detected, recreated with its mapping, refilled.

Run on both OpenSearch-API servers of the contract tier (`osmem-server`, `noida-db`). Losing the index is
real: the concrete index is deleted on the server, as a node replaced empty or a hand-made delete does.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

import pytest

from app.domain.errors import EngineUnavailableError
from app.domain.models import Filters, LexicalQuery
from app.engines.opensearch import OpenSearchLexicalIndex
from app.engines.opensearch_lifecycle import ensure_index
from app.engines.opensearch_mapping import SCHEMA_VERSION, versioned_index_name
from app.engines.opensearch_projects import project_alias
from tests.contract.lexical_index import (
    OTHER_PROJECT,
    PROJECT,
    Holdings,
    deletion_of,
    documents_of,
    make_chunk,
    search_ids,
)
from tests.contract.opensearch_servers import client_of_each_emulator, delete_indexes  # noqa: F401 - the `client` fixture

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from opensearchpy import AsyncOpenSearch

pytestmark = pytest.mark.opensearch


class Refills:
    """Records the adapter's refill calls (the wiring queues the project there), one project id per call."""

    def __init__(self) -> None:
        self.projects: list[str] = []

    @property
    def calls(self) -> int:
        return len(self.projects)

    async def __call__(self, project_id: str) -> None:
        self.projects.append(project_id)


@pytest.fixture
async def alias(client: AsyncOpenSearch, unique_name: str) -> AsyncIterator[str]:
    """The base alias; `PROJECT`'s index (`project_index(alias)`) is the one lost in these tests."""
    name = f"poimen-gen-{unique_name.replace('_', '-').replace('[', '-').replace(']', '')}"
    yield name
    with contextlib.suppress(Exception):
        await delete_indexes(client, f"{name}-p-*")


def project_index(alias: str, project_id: str = PROJECT) -> str:
    return versioned_index_name(project_alias(alias, project_id))


def adapter(client: AsyncOpenSearch, alias: str, refills: Refills) -> OpenSearchLexicalIndex:
    return OpenSearchLexicalIndex(client, index=alias, timeout_s=30.0, replicas=0, refill=refills)


async def write(index: OpenSearchLexicalIndex, chunk_id: str, text: str, project_id: str = PROJECT) -> None:
    chunk = make_chunk(chunk_id, text, document_id=chunk_id, project_id=project_id)
    await index.replace_documents(documents_of([chunk]))


async def test_a_lost_index_is_unready_then_recreated_with_its_mapping_and_refilled_once(
    client: AsyncOpenSearch, alias: str
) -> None:
    refills = Refills()
    index = adapter(client, alias, refills)
    await write(index, "before", "quartz before the loss")
    await client.indices.delete(index=project_index(alias))

    with pytest.raises(EngineUnavailableError):
        await index.ping()
    with pytest.raises(EngineUnavailableError):
        await index.search(LexicalQuery("quartz"), top_k=5, filters=Filters(PROJECT))
    await write(index, "after", "quartz after the loss")
    await write(index, "later", "quartz later still")

    assert refills.projects == [PROJECT]
    assert index.generation.refills == 1
    assert not index.generation.alias_missing
    assert sorted(await client.indices.get_alias(name=project_alias(alias, PROJECT))) == [project_index(alias)]
    mapping = await client.indices.get_mapping(index=project_index(alias))
    assert mapping[project_index(alias)]["mappings"]["_meta"]["schema_version"] == SCHEMA_VERSION
    # The refill (here only counted) brings "before" back; the writes after the loss are there.
    assert sorted(await search_ids(index, "quartz")) == ["after", "later"]
    await index.ping()


async def test_an_index_another_replica_recreated_is_refilled_by_this_one_too(
    client: AsyncOpenSearch, alias: str
) -> None:
    refills = Refills()
    index = adapter(client, alias, refills)
    await write(index, "first", "basalt first")
    await client.indices.delete(index=project_index(alias))
    await ensure_index(client, alias=project_alias(alias, PROJECT), shards=1, replicas=0)  # another replica did it

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
    await client.indices.delete(index=project_index(alias))

    await asyncio.gather(*(write(replica, f"back-{n}", "granite back") for n, replica in enumerate(replicas)))

    assert [counter.calls for counter in refills] == [1, 1, 1]
    assert sorted(await client.indices.get_alias(name=project_alias(alias, PROJECT))) == [project_index(alias)]
    assert sorted(await search_ids(replicas[0], "granite")) == ["back-0", "back-1", "back-2"]


async def test_an_unchanged_index_is_never_refilled(client: AsyncOpenSearch, alias: str) -> None:
    refills = Refills()
    index = adapter(client, alias, refills)

    for number in range(3):
        await write(index, f"steady-{number}", "marble steady")
    await index.replace_documents([])

    assert refills.calls == 0


async def test_only_the_lost_project_is_refilled_and_the_others_stay_ready(client: AsyncOpenSearch, alias: str) -> None:
    refills = Refills()
    index = adapter(client, alias, refills)
    await write(index, "kept", "slate kept", project_id="proj-kept")
    await write(index, "lost", "slate lost")
    await client.indices.delete(index=project_index(alias))

    with pytest.raises(EngineUnavailableError, match="1 projects"):
        await index.ping()
    assert await search_ids(index, "slate", filters=Filters("proj-kept")) == ["kept"]
    await write(index, "kept-2", "slate kept again", project_id="proj-kept")  # the kept project writes on
    await write(index, "back", "slate back")

    assert refills.projects == [PROJECT]
    await index.ping()


async def test_the_idle_check_recreates_and_refills_a_lost_project_nothing_writes(
    client: AsyncOpenSearch, alias: str
) -> None:
    refills = Refills()
    index = adapter(client, alias, refills)
    await write(index, "quiet", "shale quiet")
    await client.indices.delete(index=project_index(alias))

    await index.replace_documents([])  # the outbox's idle call

    assert refills.projects == [PROJECT]
    assert sorted(await client.indices.get_alias(name=project_alias(alias, PROJECT))) == [project_index(alias)]
    await index.ping()


async def test_a_project_index_seen_at_start_is_known_so_its_loss_is_refilled(
    client: AsyncOpenSearch, alias: str
) -> None:
    await write(adapter(client, alias, Refills()), "earlier", "flint earlier")  # a process before this one
    refills = Refills()
    index = adapter(client, alias, refills)
    assert await index.discover_projects() == 1  # at start (the wiring)
    await client.indices.delete(index=project_index(alias))

    with pytest.raises(EngineUnavailableError):
        await index.search(LexicalQuery("flint"), top_k=5, filters=Filters(PROJECT))
    await write(index, "later", "flint later")

    assert refills.projects == [PROJECT]


async def test_a_project_never_written_reads_as_no_chunks_and_its_first_write_refills_nothing(
    client: AsyncOpenSearch, alias: str
) -> None:
    refills = Refills()
    index = adapter(client, alias, refills)

    assert await index.search(LexicalQuery("pumice"), top_k=5, filters=Filters(PROJECT)) == []
    await index.ping()
    await write(index, "first", "pumice first")

    assert refills.calls == 0
    assert await search_ids(index, "pumice") == ["first"]


async def test_a_deleted_project_is_forgotten_so_its_next_write_refills_nothing(
    client: AsyncOpenSearch, alias: str
) -> None:
    refills = Refills()
    index = adapter(client, alias, refills)
    await write(index, "old", "chalk old")

    await index.delete_project(PROJECT)
    await index.ping()
    assert await index.search(LexicalQuery("chalk"), top_k=5, filters=Filters(PROJECT)) == []
    await write(index, "new", "chalk new")

    assert refills.calls == 0
    assert await search_ids(index, "chalk") == ["new"]


def pruning_adapter(
    client: AsyncOpenSearch, alias: str, refills: Refills, holdings: Holdings
) -> OpenSearchLexicalIndex:
    return OpenSearchLexicalIndex(
        client,
        index=alias,
        timeout_s=30.0,
        replicas=0,
        refill=refills,
        holds_documents=holdings.holds,
        projects_with_documents=holdings.listed,
    )


async def index_exists(client: AsyncOpenSearch, alias: str, project_id: str = PROJECT) -> bool:
    return bool(await client.indices.exists_alias(name=project_alias(alias, project_id)))


async def test_a_deleted_projects_index_is_pruned_and_another_replica_reads_it_as_deleted_not_lost(
    client: AsyncOpenSearch, alias: str
) -> None:
    # An empty index stayed for every deleted project, a shard each, until the shard limit refused new ones.
    holdings, refills = Holdings(PROJECT, OTHER_PROJECT), Refills()
    pruner, other = pruning_adapter(client, alias, refills, holdings), pruning_adapter(client, alias, refills, holdings)
    await write(pruner, "doomed", "basalt of a project about to go")
    await write(pruner, "kept", "basalt of a project that stays", project_id=OTHER_PROJECT)
    await other.discover_projects()  # the other replica knows the project: a missing index would be a loss
    holdings.project_ids.discard(PROJECT)  # the project deleted in PostgreSQL

    await pruner.replace_documents([deletion_of(PROJECT, "doomed")])  # its last document's delete

    assert not await index_exists(client, alias)
    assert await index_exists(client, alias, OTHER_PROJECT)
    await other.ping()  # ready: not lost
    assert await other.search(LexicalQuery("basalt"), top_k=5, filters=Filters(PROJECT)) == []
    await other.generation.check_known(other._request_options())
    assert not await index_exists(client, alias)  # not recreated empty by the replica that knew it
    assert refills.calls == 0
    assert await search_ids(other, "basalt", filters=Filters(OTHER_PROJECT)) == ["kept"]


async def test_a_delete_or_a_stale_write_for_a_pruned_project_makes_no_index(
    client: AsyncOpenSearch, alias: str
) -> None:
    holdings, refills = Holdings(PROJECT), Refills()
    index = pruning_adapter(client, alias, refills, holdings)
    await write(index, "gone", "granite gone")
    holdings.project_ids.clear()  # emptied with no delete through this replica: the periodic prune finds it
    assert await index.prune_emptied_projects() == [PROJECT]

    await index.replace_documents([deletion_of(PROJECT, "gone")])  # a replica's late delete
    await write(index, "gone", "granite written by a writer older than the delete")  # a stale writer

    assert not await index_exists(client, alias)
    assert refills.calls == 0


async def test_a_project_written_again_after_its_prune_gets_a_new_index(client: AsyncOpenSearch, alias: str) -> None:
    holdings, refills = Holdings(PROJECT), Refills()
    pruner, other = pruning_adapter(client, alias, refills, holdings), pruning_adapter(client, alias, refills, holdings)
    await write(pruner, "first", "marble first life")
    await other.discover_projects()
    holdings.project_ids.clear()
    await pruner.replace_documents([deletion_of(PROJECT, "first")])

    holdings.project_ids.add(PROJECT)
    await write(pruner, "second", "marble second life")

    assert await search_ids(pruner, "marble") == ["second"]
    assert await search_ids(other, "marble") == ["second"]
    assert refills.calls == 0  # a new index on a first write, not a loss


async def test_a_project_holding_documents_is_never_pruned_and_its_lost_index_is_still_refilled(
    client: AsyncOpenSearch, alias: str
) -> None:
    holdings, refills = Holdings(PROJECT), Refills()
    index = pruning_adapter(client, alias, refills, holdings)
    await write(index, "stays", "slate that stays")

    assert await index.prune_emptied_projects() == []
    await index.replace_documents([deletion_of(PROJECT, "no-such-document")])  # a delete leaving others
    assert await index_exists(client, alias)
    await client.indices.delete(index=project_index(alias))
    with pytest.raises(EngineUnavailableError):
        await index.ping()
    await write(index, "after", "slate after the loss")

    assert refills.projects == [PROJECT]
