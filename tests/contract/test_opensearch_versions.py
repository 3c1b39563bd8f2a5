"""Many outbox workers, one truth: OpenSearch writes versioned by the outbox, so the newest snapshot wins.

Every case runs on both OpenSearch-API servers from PyPI (or a real cluster for `osmem`, with
`OPENSEARCH_URL`). Both were checked to honour what the adapter relies on: `external_gte` (an older
version answers 409 `version_conflict_engine_exception`, an equal one replays), in `_bulk` too; a
`range` on a `long` in `delete_by_query`; and `_reindex` with `dest.version_type: external` keeping
`_version`; and a real-time `mget` answering `_version`. They differ where these tests do not rely
on it: after an externally versioned delete osmem-server keeps a tombstone that refuses older writes,
noida-db does not (the adapter keeps its own, the document's version marker); and osmem-server's BM25
counts version markers as documents, Lucene's does not (`test_markers_change_no_search_score`).
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pytest
from opensearchpy import AsyncOpenSearch

from app.domain.errors import EngineError
from app.domain.models import DocumentChunks, Filters, LexicalQuery
from app.engines.opensearch import OpenSearchLexicalIndex
from app.engines.opensearch_bodies import chunk_document, document_key
from app.engines.opensearch_lifecycle import ensure_index
from app.engines.opensearch_mapping import SCHEMA_VERSION, index_body, versioned_index_name
from app.engines.opensearch_markers import marker_key
from app.engines.opensearch_projects import project_alias
from tests.contract.lexical_index import PROJECT, make_chunk
from tests.contract.opensearch_servers import REAL_CLUSTER_URL, delete_indexes

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping, Sequence

pytestmark = pytest.mark.opensearch

DOCUMENT = "doc-versioned"


def snapshot(version: int | None, *chunks: tuple[str, str]) -> DocumentChunks:
    """`DOCUMENT` at an outbox version: (chunk_id, text) pairs, each hashed as `<text>`."""
    return DocumentChunks(
        PROJECT,
        DOCUMENT,
        tuple(
            make_chunk(chunk_id, text, document_id=DOCUMENT, position=number, chunk_hash=text)
            for number, (chunk_id, text) in enumerate(chunks)
        ),
        outbox_version=version,
    )


def deleted(document_id: str, version: int) -> DocumentChunks:
    """A deleted document (no chunks) at an outbox version: only its marker is written."""
    return DocumentChunks(PROJECT, document_id, (), outbox_version=version)


async def indexed(
    client: AsyncOpenSearch, alias: str, document_id: str = DOCUMENT
) -> dict[str, tuple[str, int | None]]:
    """What the index holds for one document: chunk id -> (chunk hash, stored outbox version)."""
    response = await client.search(
        index=project_alias(alias, PROJECT),
        body={
            "size": 100,
            "query": {"bool": {"filter": [{"term": {"project_id": PROJECT}}, {"term": {"document_id": document_id}}]}},
            "_source": ["chunk_id", "chunk_hash", "outbox_version"],
        },
    )
    sources = [hit["_source"] for hit in response["hits"]["hits"]]
    return {source["chunk_id"]: (source["chunk_hash"], source.get("outbox_version")) for source in sources}


@pytest.fixture(params=["osmem", "noida"])
async def target(
    request: pytest.FixtureRequest, opensearch_client: AsyncOpenSearch, noida_url: str, unique_name: str
) -> AsyncIterator[tuple[AsyncOpenSearch, str]]:
    """(client, base alias) on osmem-server (or `OPENSEARCH_URL`) or on noida-db; project indexes deleted after."""
    alias = f"poimen-test-{unique_name.replace('_', '-').replace('[', '-').replace(']', '')}"
    owned = request.param == "noida"
    client = AsyncOpenSearch(hosts=[noida_url], timeout=30) if owned else opensearch_client
    try:
        yield client, alias
    finally:
        with contextlib.suppress(Exception):
            await delete_indexes(client, f"{alias}-p-*")
        if owned:
            await client.close()


async def test_a_stale_writer_cannot_overwrite_a_newer_version(target: tuple[AsyncOpenSearch, str]) -> None:
    client, alias = target
    index = OpenSearchLexicalIndex(client, index=alias)
    await index.replace_documents([snapshot(6, ("c1", "six one"), ("c2", "six two"))])

    # Overlaps c1 (refused: version 6 is there) and adds c3, which it must take back as well.
    await index.replace_documents([snapshot(5, ("c1", "five one"), ("c3", "five three"))])

    assert await indexed(client, alias) == {"c1": ("six one", 6), "c2": ("six two", 6)}


async def test_a_stale_delete_removes_nothing(target: tuple[AsyncOpenSearch, str]) -> None:
    client, alias = target
    index = OpenSearchLexicalIndex(client, index=alias)
    await index.replace_documents([snapshot(6, ("c1", "six one"), ("c2", "six two"))])

    await index.replace_documents([snapshot(5)])

    assert await indexed(client, alias) == {"c1": ("six one", 6), "c2": ("six two", 6)}


async def test_a_newer_delete_removes_every_chunk_of_the_document(target: tuple[AsyncOpenSearch, str]) -> None:
    client, alias = target
    index = OpenSearchLexicalIndex(client, index=alias)
    other = DocumentChunks(PROJECT, "doc-other", (make_chunk("o1", "other text", document_id="doc-other"),), 3)
    await index.replace_documents([snapshot(6, ("c1", "six one"), ("c2", "six two")), other])

    await index.replace_documents([snapshot(7)])

    assert await indexed(client, alias) == {}
    assert await indexed(client, alias, "doc-other") == {"o1": ("hash-o1", 3)}


async def test_a_newer_write_with_fewer_chunks_removes_the_older_extra_chunks(
    target: tuple[AsyncOpenSearch, str],
) -> None:
    client, alias = target
    index = OpenSearchLexicalIndex(client, index=alias)
    await index.replace_documents([snapshot(6, ("c1", "six one"), ("c2", "six two"), ("c3", "six three"))])

    await index.replace_documents([snapshot(7, ("c1", "seven one"))])

    assert await indexed(client, alias) == {"c1": ("seven one", 7)}


async def test_replaying_the_same_version_is_idempotent(target: tuple[AsyncOpenSearch, str]) -> None:
    client, alias = target
    index = OpenSearchLexicalIndex(client, index=alias)
    written = snapshot(6, ("c1", "six one"), ("c2", "six two"))
    await index.replace_documents([written])

    await index.replace_documents([written])  # a retried outbox batch: no error, no change

    assert await indexed(client, alias) == {"c1": ("six one", 6), "c2": ("six two", 6)}


async def test_an_unversioned_write_replaces_as_before_versioning(target: tuple[AsyncOpenSearch, str]) -> None:
    client, alias = target
    index = OpenSearchLexicalIndex(client, index=alias)
    await index.replace_documents([snapshot(6, ("c1", "six one"), ("c2", "six two"))])

    await index.replace_documents([snapshot(None, ("c1", "plain one"))])

    assert await indexed(client, alias) == {"c1": ("plain one", None)}


class DelayedIndex(OpenSearchLexicalIndex):
    """The real adapter, with a write of one outbox version held at a gate before one of its two steps."""

    def __init__(self, client: AsyncOpenSearch, *, index: str, held_version: int, before: str) -> None:
        super().__init__(client, index=index)
        self.gate = asyncio.Event()
        self.reached = asyncio.Event()
        self._held_version, self._before = held_version, before

    async def _hold(self, documents: Sequence[DocumentChunks], step: str) -> None:
        if step == self._before and any(document.outbox_version == self._held_version for document in documents):
            self.reached.set()
            await self.gate.wait()

    async def _index_chunks(
        self, documents: Sequence[DocumentChunks], options: Mapping[str, Any]
    ) -> frozenset[tuple[str, str]]:
        await self._hold(documents, "index")
        return await super()._index_chunks(documents, options)

    async def _delete_stale_chunks(
        self,
        documents: Sequence[DocumentChunks],
        *,
        superseded: frozenset[tuple[str, str]],
        options: Mapping[str, Any],
    ) -> None:
        await self._hold(documents, "delete")
        await super()._delete_stale_chunks(documents, superseded=superseded, options=options)


@pytest.mark.parametrize("before", ["index", "delete"])
async def test_a_delayed_older_write_loses_to_a_concurrent_newer_one(
    target: tuple[AsyncOpenSearch, str], before: str
) -> None:
    client, alias = target
    index = DelayedIndex(client, index=alias, held_version=5, before=before)
    await index.replace_documents([snapshot(4, ("c1", "four one"), ("c9", "four nine"))])
    older = asyncio.create_task(index.replace_documents([snapshot(5, ("c1", "five one"), ("c3", "five three"))]))
    await asyncio.wait_for(index.reached.wait(), timeout=10)

    await index.replace_documents([snapshot(6, ("c1", "six one"), ("c2", "six two"))])
    index.gate.set()
    await asyncio.wait_for(older, timeout=10)

    assert await indexed(client, alias) == {"c1": ("six one", 6), "c2": ("six two", 6)}


async def test_a_late_stale_write_of_chunks_the_newer_version_never_had_leaves_nothing(
    target: tuple[AsyncOpenSearch, str],
) -> None:
    client, alias = target
    index = OpenSearchLexicalIndex(client, index=alias)
    await index.replace_documents([snapshot(6, ("c1", "six one"))])

    await index.replace_documents([snapshot(5, ("c5", "five five"))])

    assert await indexed(client, alias) == {"c1": ("six one", 6)}


async def test_a_stale_write_after_a_newer_delete_leaves_nothing(target: tuple[AsyncOpenSearch, str]) -> None:
    client, alias = target
    index = OpenSearchLexicalIndex(client, index=alias)
    await index.replace_documents([snapshot(5, ("c1", "five one"))])
    await index.replace_documents([snapshot(7)])  # the marker outlives the chunks: it is the tombstone

    await index.replace_documents([snapshot(6, ("c6", "six six"))])

    assert await indexed(client, alias) == {}


async def test_a_retried_stale_write_takes_back_what_its_failed_attempt_left(
    target: tuple[AsyncOpenSearch, str],
) -> None:
    client, alias = target
    index = OpenSearchLexicalIndex(client, index=alias)
    await index.replace_documents([snapshot(6, ("c1", "six one"))])
    # A first attempt at version 5 wrote c5, which became visible only after version 6's delete ran.
    left = snapshot(5, ("c5", "five five"))
    await client.index(
        index=project_alias(alias, PROJECT),
        id=document_key(PROJECT, "c5"),
        body=chunk_document(left.chunks[0], indexed_at=datetime.now(UTC), outbox_version=5),
        version=5,
        version_type="external_gte",
        refresh=True,
    )

    await index.replace_documents([left])

    assert await indexed(client, alias) == {"c1": ("six one", 6)}


@pytest.mark.parametrize("before", ["index", "delete"])
async def test_a_delayed_older_write_of_chunks_the_newer_never_had_is_taken_back(
    target: tuple[AsyncOpenSearch, str], before: str
) -> None:
    client, alias = target
    index = DelayedIndex(client, index=alias, held_version=5, before=before)
    await index.replace_documents([snapshot(4, ("c1", "four one"))])
    # Version 5 claims the marker, then waits; no chunk id of it is one version 6 writes.
    older = asyncio.create_task(index.replace_documents([snapshot(5, ("c5", "five five"))]))
    await asyncio.wait_for(index.reached.wait(), timeout=10)

    await index.replace_documents([snapshot(6, ("c6", "six six"))])
    index.gate.set()
    await asyncio.wait_for(older, timeout=10)

    assert await indexed(client, alias) == {"c6": ("six six", 6)}


async def test_markers_change_no_search_score(
    target: tuple[AsyncOpenSearch, str], request: pytest.FixtureRequest
) -> None:
    if request.node.callspec.params["target"] == "osmem" and REAL_CLUSTER_URL is None:
        pytest.skip(
            "osmem-server 0.1.6 emulator: its BM25 counts every document of the index, Lucene (a real cluster, "
            "noida-db) only those holding the searched field, which a marker never does"
        )
    client, alias = target
    index = OpenSearchLexicalIndex(client, index=alias)
    await index.replace_documents([snapshot(None, ("c1", "alpha beta"), ("c2", "gamma delta"))])
    query, filters = LexicalQuery("alpha"), Filters(PROJECT)
    before = await index.search(query, top_k=5, filters=filters)

    await index.replace_documents([deleted(f"doc-gone-{number}", 9) for number in range(20)])  # twenty markers

    after = await index.search(query, top_k=5, filters=filters)
    assert [(hit.chunk.chunk_id, hit.score) for hit in after] == [(hit.chunk.chunk_id, hit.score) for hit in before]
    assert await index.search(LexicalQuery("doc-gone-1 marker"), top_k=5, filters=filters) == []


async def test_deleting_the_project_removes_its_index_with_its_markers(target: tuple[AsyncOpenSearch, str]) -> None:
    client, alias = target
    index = OpenSearchLexicalIndex(client, index=alias)
    other = DocumentChunks("proj-beta", DOCUMENT, (make_chunk("b1", "beta one", project_id="proj-beta"),), 3)
    await index.replace_documents([snapshot(6, ("c1", "six one")), deleted("doc-gone", 7), other])

    await index.delete_project(PROJECT)

    assert not await client.indices.exists_alias(name=project_alias(alias, PROJECT))
    beta = project_alias(alias, "proj-beta")
    await client.indices.refresh(index=beta)
    remaining = await client.search(index=beta, body={"size": 10, "query": {"match_all": {}}, "_source": False})
    assert sorted(hit["_id"] for hit in remaining["hits"]["hits"]) == [
        marker_key("proj-beta", DOCUMENT),
        "proj-beta:b1",
    ]


async def old_version_index(client: AsyncOpenSearch, alias: str) -> str:
    """The project's index built by the previous schema version, behind the project's alias."""
    project = project_alias(alias, PROJECT)
    old_body = index_body(shards=1, replicas=0)
    old_body["mappings"]["_meta"] = {"schema_version": SCHEMA_VERSION - 1}
    await client.indices.create(
        index=versioned_index_name(project, SCHEMA_VERSION - 1), body=old_body | {"aliases": {project: {}}}
    )
    return project


async def test_moving_the_alias_keeps_the_markers(target: tuple[AsyncOpenSearch, str]) -> None:
    client, alias = target
    project = await old_version_index(client, alias)
    index = OpenSearchLexicalIndex(client, index=alias)
    await index.replace_documents([snapshot(6)])
    await ensure_index(client, alias=project, shards=1, replicas=0)

    await index.replace_documents([snapshot(5, ("c5", "five five"))])

    assert await indexed(client, alias) == {}


async def test_moving_the_alias_to_a_new_schema_version_keeps_external_versions(
    target: tuple[AsyncOpenSearch, str],
) -> None:
    client, alias = target
    project = await old_version_index(client, alias)
    index = OpenSearchLexicalIndex(client, index=alias)
    await index.replace_documents([snapshot(6, ("c1", "six one"))])
    await ensure_index(client, alias=project, shards=1, replicas=0)

    await index.replace_documents([snapshot(5, ("c1", "five one"))])

    assert list(await client.indices.get_alias(name=project)) == [versioned_index_name(project)]
    assert await indexed(client, alias) == {"c1": ("six one", 6)}


async def test_a_write_while_the_upgrade_copies_is_refused_then_lands_in_the_new_index(
    target: tuple[AsyncOpenSearch, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # An old replica's outbox writes while a new replica copies the project's index: without the block,
    # the write landed in the old index after `_reindex` had read it, and the alias moved past it.
    client, alias = target
    project = await old_version_index(client, alias)
    old_replica = OpenSearchLexicalIndex(client, index=alias)
    await old_replica.replace_documents([snapshot(5, ("c1", "five one"))])
    copy = client.reindex
    refused: list[EngineError] = []

    async def reindex_while_an_old_replica_writes(*args: Any, **kwargs: Any) -> Any:
        try:
            await old_replica.replace_documents([snapshot(6, ("c1", "six one"))])
        except EngineError as error:
            refused.append(error)
        return await copy(*args, **kwargs)

    monkeypatch.setattr(client, "reindex", reindex_while_an_old_replica_writes)
    await ensure_index(client, alias=project, shards=1, replicas=0)
    monkeypatch.undo()
    await old_replica.replace_documents([snapshot(6, ("c1", "six one"))])  # the outbox's retry

    assert len(refused) == 1
    assert await indexed(client, alias) == {"c1": ("six one", 6)}
    assert list(await client.indices.get_alias(name=project)) == [versioned_index_name(project)]


async def test_replicas_upgrading_one_project_together_all_start(target: tuple[AsyncOpenSearch, str]) -> None:
    client, alias = target
    project = await old_version_index(client, alias)
    await OpenSearchLexicalIndex(client, index=alias).replace_documents([snapshot(5, ("c1", "five one"))])

    upgraded = await asyncio.gather(*(ensure_index(client, alias=project, shards=1, replicas=0) for _ in range(3)))

    assert upgraded == [versioned_index_name(project)] * 3
    assert list(await client.indices.get_alias(name=project)) == [versioned_index_name(project)]
    assert await indexed(client, alias) == {"c1": ("five one", 5)}
