"""One OpenSearch index per project: the layout on the server, and the start-up steps of an upgrade.

Run on both OpenSearch-API servers of the contract tier (`osmem-server` or `OPENSEARCH_URL`, `noida-db`).
"""

from __future__ import annotations

import contextlib
import re
from typing import TYPE_CHECKING, Any

import pytest
from opensearchpy import AsyncOpenSearch, AsyncTransport

from app.domain.errors import EngineRejectedError
from app.domain.models import DocumentChunks, Filters
from app.engines.opensearch import OpenSearchLexicalIndex
from app.engines.opensearch_lifecycle import prepare_project_indexes, retire_shared_index
from app.engines.opensearch_mapping import SCHEMA_VERSION, index_body, versioned_index_name
from app.engines.opensearch_projects import project_alias, shared_index_names
from tests.contract.lexical_index import OTHER_PROJECT, PROJECT, make_chunk, search_ids
from tests.contract.opensearch_servers import delete_indexes

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

pytestmark = pytest.mark.opensearch

SHARED_SCHEMA_VERSION = 6
"""The last schema version that kept every project in one index behind the base alias."""


@pytest.fixture(params=["osmem", "noida"])
async def target(request: pytest.FixtureRequest, unique_name: str) -> AsyncIterator[tuple[AsyncOpenSearch, str]]:
    """(client, base alias) on osmem-server (or `OPENSEARCH_URL`) or noida-db; every index under it deleted after."""
    url = request.getfixturevalue("opensearch_url" if request.param == "osmem" else "noida_url")
    client = AsyncOpenSearch(hosts=[url], timeout=30)
    base = f"poimen-layout-{unique_name.replace('_', '-').replace('[', '-').replace(']', '')}"
    try:
        yield client, base
    finally:
        with contextlib.suppress(Exception):
            await delete_indexes(client, f"{base}-v*,{base}-p-*")
        await client.close()


class RecordingTransport(AsyncTransport):
    """The client's own transport, noting each request's method and path before sending it on unchanged."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.requests: list[tuple[str, str]] = []

    async def perform_request(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        self.requests.append((method, url))
        return await super().perform_request(method, url, *args, **kwargs)


async def old_index(client: AsyncOpenSearch, alias: str, version: int) -> str:
    """An index of schema `version` (an older one, or a newer release's) behind `alias`; returns its name."""
    body = index_body(shards=1, replicas=0)
    body["mappings"]["_meta"] = {"schema_version": version}
    name = versioned_index_name(alias, version)
    await client.indices.create(index=name, body=body | {"aliases": {alias: {}}})
    return name


async def test_each_project_gets_its_own_one_shard_index_behind_its_alias(
    target: tuple[AsyncOpenSearch, str],
) -> None:
    client, base = target
    index = OpenSearchLexicalIndex(client, index=base, replicas=0)

    # One batch, two projects whose ids differ only in case: two indexes, one bulk request.
    await index.replace_documents(
        [
            DocumentChunks("Notes", "d1", (make_chunk("c-upper", "tuff upper", project_id="Notes"),), 1),
            DocumentChunks("notes", "d1", (make_chunk("c-lower", "tuff lower", project_id="notes"),), 2),
        ]
    )

    for project_id, escaped in (("Notes", "_notes"), ("notes", "notes")):
        alias = project_alias(base, project_id)
        assert alias == f"{base}-p-{escaped}"
        assert sorted(await client.indices.get_alias(name=alias)) == [f"{alias}_-v{SCHEMA_VERSION}"]
        settings = await client.indices.get_settings(index=alias)
        assert settings[f"{alias}_-v{SCHEMA_VERSION}"]["settings"]["index"]["number_of_shards"] == "1"
    assert await search_ids(index, "tuff", filters=Filters("Notes")) == ["c-upper"]
    assert await search_ids(index, "tuff", filters=Filters("notes")) == ["c-lower"]
    assert not await client.indices.exists_alias(name=base)  # nothing shared


async def test_start_finds_the_shared_index_and_retires_it_keeping_it_for_a_rollback(
    target: tuple[AsyncOpenSearch, str],
) -> None:
    client, base = target
    shared = await old_index(client, base, SHARED_SCHEMA_VERSION)

    found = await prepare_project_indexes(client, base=base, replicas=0)
    await retire_shared_index(client, base=base)
    await retire_shared_index(client, base=base)  # another replica after this one: not an error

    assert found is True
    assert not await client.indices.exists_alias(name=base)
    assert await client.indices.exists(index=shared)
    assert await prepare_project_indexes(client, base=base, replicas=0) is False  # the next start: done


async def test_start_moves_a_project_index_of_an_older_schema_keeping_its_chunks(
    target: tuple[AsyncOpenSearch, str],
) -> None:
    client, base = target
    alias = project_alias(base, PROJECT)
    older = await old_index(client, alias, SCHEMA_VERSION - 1)
    index = OpenSearchLexicalIndex(client, index=base, replicas=0)
    await index.replace_documents([DocumentChunks(PROJECT, "d1", (make_chunk("c-1", "obsidian carried"),), 4)])

    found = await prepare_project_indexes(client, base=base, replicas=0)

    assert found is False
    assert sorted(await client.indices.get_alias(name=alias)) == [versioned_index_name(alias)]
    assert await client.indices.exists(index=older)  # kept for rollback
    assert await search_ids(index, "obsidian") == ["c-1"]


async def test_start_leaves_a_project_index_of_a_newer_schema_as_it_is_and_writes_through_its_alias(
    target: tuple[AsyncOpenSearch, str], caplog: pytest.LogCaptureFixture
) -> None:
    # An older release started after a newer one upgraded the index (a pod restarted during a rolling update, a
    # rollback): its start failed on "alias ... points at ..." and the pod crash-looped. Its running pods write
    # through the alias into the newer index meanwhile; a starting one now does the same.
    client, base = target
    alias = project_alias(base, PROJECT)
    newer = await old_index(client, alias, SCHEMA_VERSION + 1)
    index = OpenSearchLexicalIndex(client, index=base, replicas=0)

    found = await prepare_project_indexes(client, base=base, replicas=0)
    await index.replace_documents([DocumentChunks(PROJECT, "d1", (make_chunk("c-1", "obsidian carried"),), 4)])

    assert found is False
    assert sorted(await client.indices.get_alias(name=alias)) == [newer]
    assert await search_ids(index, "obsidian") == ["c-1"]
    assert f"newer schema than this release's {SCHEMA_VERSION}" in caplog.text


async def test_a_project_named_like_another_projects_index_has_its_own(target: tuple[AsyncOpenSearch, str]) -> None:
    client, base = target
    index = OpenSearchLexicalIndex(client, index=base, replicas=0)
    # Up to schema 9, `coll`'s index was `...-p-coll-v9`: the name of project `coll-v9`'s alias.
    named_like = [f"coll-v{version}" for version in (SCHEMA_VERSION - 1, SCHEMA_VERSION)]

    for project_id in ("coll", *named_like):
        chunk = make_chunk(f"c-{project_id}", "heron", project_id=project_id)
        await index.replace_documents([DocumentChunks(project_id, "d1", (chunk,), 1)])

    for project_id in ("coll", *named_like):
        assert await search_ids(index, "heron", filters=Filters(project_id)) == [f"c-{project_id}"]


async def test_a_project_whose_alias_name_a_concrete_index_squats_is_refused_and_the_others_are_not(
    target: tuple[AsyncOpenSearch, str],
) -> None:
    client, base = target
    index = OpenSearchLexicalIndex(client, index=base, replicas=0)
    # An index of schema 9 that another project's alias moved off (kept for a rollback), named like this alias.
    await client.indices.create(index=project_alias(base, "squatted"), body=index_body(shards=1, replicas=0))
    documents = {
        project_id: DocumentChunks(
            project_id, "d1", (make_chunk(f"c-{project_id}", "heron", project_id=project_id),), 1
        )
        for project_id in ("squatted", "other")
    }

    with pytest.raises(EngineRejectedError, match="where the alias belongs"):
        await index.replace_documents(list(documents.values()))  # the outbox then indexes each project apart
    await index.replace_documents([documents["other"]])

    assert await search_ids(index, "heron", filters=Filters("other")) == ["c-other"]


async def test_every_alias_read_names_the_services_own_indexes(target: tuple[AsyncOpenSearch, str]) -> None:
    # `GET /_alias/<name>` names no index: OpenSearch's security plugin then checks it against every index of the
    # cluster (opensearch-project/security#5871), and the service's role needed alias reads on `*`. The chart's
    # role grants them on the patterns below only (charts/poimen-memory/ci/production-stack-values.yaml).
    server, base = target
    client = AsyncOpenSearch(hosts=server.transport.hosts, timeout=30, transport_class=RecordingTransport)
    transport = client.transport
    assert isinstance(transport, RecordingTransport)
    granted = [f"{base}-p-*", *shared_index_names(base)]  # no `{base}-v*`: another deployment's may be `{base}-v2`
    try:
        await old_index(client, base, SHARED_SCHEMA_VERSION)
        await old_index(client, project_alias(base, PROJECT), SCHEMA_VERSION - 1)
        index = OpenSearchLexicalIndex(client, index=base, replicas=0)

        # A start (a project to upgrade, the shared index to retire, twice), a new project, its deletion (twice).
        assert await prepare_project_indexes(client, base=base, replicas=0) is True
        await retire_shared_index(client, base=base)
        await retire_shared_index(client, base=base)
        await index.replace_documents(
            [DocumentChunks(OTHER_PROJECT, "d1", (make_chunk("c-1", "heron", project_id=OTHER_PROJECT),), 1)]
        )
        await index.delete_project(OTHER_PROJECT)
        await index.delete_project(OTHER_PROJECT)
        await index.delete_project(PROJECT)
    finally:
        await client.close()

    reads = [(method, path) for method, path in transport.requests if "/_alias/" in path and method in {"GET", "HEAD"}]
    assert {method for method, _ in reads} == {"GET", "HEAD"}  # get_alias and exists_alias
    for method, path in reads:
        named = path.split("/")[1]
        assert any(re.fullmatch(re.escape(pattern).replace(r"\*", ".*"), named) for pattern in granted), (method, path)
    assert not await server.indices.exists_alias(name=base)
    assert not await server.indices.exists_alias(name=project_alias(base, PROJECT))
    assert not await server.indices.exists_alias(name=project_alias(base, OTHER_PROJECT))
