"""The lexical contract on OpenSearch: a real cluster when `OPENSEARCH_URL` is set, else `osmem-server`.

Plus what only this adapter has: versioned index behind an alias, forwarded JWT, error translation
over real HTTP, and a ranking check of tantivy against `noida-db`'s Lucene-exact BM25.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import random
import socket
from typing import TYPE_CHECKING, Any

import pytest
from aiohttp import web
from opensearchpy import AsyncOpenSearch
from pydantic import ValidationError

from app.auth.forwarding import forwarded_token
from app.config import Settings
from app.domain.errors import EngineTimeoutError, EngineUnavailableError
from app.domain.models import DocumentChunks, Filters, LexicalQuery
from app.engines.opensearch import OpenSearchLexicalIndex
from app.engines.opensearch_lifecycle import create_opensearch_client, ensure_index
from app.engines.opensearch_mapping import SCHEMA_VERSION, TEXT_ANALYZER, index_body, versioned_index_name
from app.engines.opensearch_projects import project_alias
from app.engines.tantivy_index import TantivyLexicalIndex
from tests.contract.lexical_index import (
    PROJECT,
    LexicalIndexContract,
    index_chunks,
    make_chunk,
    search_hits,
    search_ids,
)
from tests.contract.opensearch_servers import REAL_CLUSTER_URL, delete_indexes

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from app.domain.ports import LexicalIndex

pytestmark = pytest.mark.opensearch

VERSION_12_CHAR_FILTERS = ("word_joiners_as_space", "format_characters_dropped", "dotted_capital_i")

# Contract cases osmem-server 0.1.6 cannot run, each with the exact reason. They run on a real cluster.
EMULATOR_GAPS: dict[str, str] = {
    "test_thai_lao_khmer_and_burmese_words_inside_a_run_are_found": (
        "it finds no Thai, Lao, Khmer or Burmese word at all, not even a note holding nothing but the query's word"
        " nor one searched with its whole text, though its _analyze gives the mapping's terms; noida-db (Lucene) passes"
    ),
    "test_fuzzy_keeps_the_exact_match_first": (
        "its BM25 is not Lucene's and scores a fuzzy expansion like an exact term, so the misspelt 'clustre' "
        "ranks first; on Lucene-exact BM25 the same request ranks the exact match first "
        "(see test_fuzzy_keeps_the_exact_match_first_on_lucene_bm25)"
    ),
    "test_a_capital_sigma_is_found_lowered_letter_by_letter": (
        "it indexes a word-final capital sigma as a final sigma (ΟΔΟΣ as οδος), where Lucene's LowerCaseFilter"
        " lowers each letter alone (οδοσ), as its own _analyze and noida-db (TestOpenSearchLexicalIndexOnLucene) do"
    ),
    "test_a_final_sigma_is_found_by_the_capital_and_the_other_way_round": (
        "it indexes a word-final capital sigma as a final sigma (ΟΔΟΣ as οδος) and does not apply the mapping's"
        " final_sigma pattern_replace token filter, so οδοσ finds neither spelling; noida-db (Lucene) passes"
    ),
    "test_a_tag_with_a_capital_sigma_filters_in_any_case": (
        "its lowercase normalizer keys a word-final capital sigma as a final sigma (ΟΔΟΣ as οδος), where Lucene's"
        " LowerCaseFilter lowers each letter alone (οδοσ), as noida-db (TestOpenSearchLexicalIndexOnLucene) does"
    ),
    "test_a_tag_with_a_dotted_capital_i_filters_in_any_case": (
        "its lowercase normalizer does not key İstanbul as istanbul, as Lucene's LowerCaseFilter does"
        " (Character.toLowerCase maps İ to i)"
    ),
}
LUCENE_EMULATOR_GAPS: dict[str, str] = {
    "test_a_tag_with_a_dotted_capital_i_filters_in_any_case": (
        "its lowercase normalizer leaves İ as it is, where Lucene's LowerCaseFilter (Character.toLowerCase) lowers"
        " it to i: İstanbul is keyed İstanbul, not istanbul"
    ),
}


class TestOpenSearchLexicalIndexOnLucene(LexicalIndexContract):
    """The same contract on noida-db (Elasticsearch 8 API, Lucene-exact BM25)."""

    @pytest.fixture(autouse=True)
    def _skip_emulator_gaps(self, request: pytest.FixtureRequest) -> None:
        reason = LUCENE_EMULATOR_GAPS.get(request.node.originalname)
        if reason is not None and REAL_CLUSTER_URL is None:
            pytest.skip(f"noida-db 0.2.3 emulator: {reason}")

    @pytest.fixture
    async def index(self, noida_url: str, unique_name: str) -> AsyncIterator[LexicalIndex]:
        client = AsyncOpenSearch(hosts=[noida_url], timeout=30)
        alias = f"poimen-test-{unique_name.replace('_', '-')}"
        yield OpenSearchLexicalIndex(client, index=alias, timeout_s=30.0, replicas=0)
        await delete_indexes(client, f"{alias}-p-*")
        await client.close()


class TestOpenSearchLexicalIndex(LexicalIndexContract):
    @pytest.fixture(autouse=True)
    def _skip_emulator_gaps(self, request: pytest.FixtureRequest) -> None:
        reason = EMULATOR_GAPS.get(request.node.originalname)
        if reason is not None and REAL_CLUSTER_URL is None:
            pytest.skip(f"osmem-server 0.1.6 emulator: {reason}")

    @pytest.fixture
    async def index(self, opensearch_client: AsyncOpenSearch, opensearch_alias: str) -> LexicalIndex:
        return OpenSearchLexicalIndex(opensearch_client, index=opensearch_alias, timeout_s=10.0, replicas=0)


# --- index lifecycle ------------------------------------------------------------------------------


async def test_ensure_index_creates_a_versioned_index_behind_the_alias(
    opensearch_client: AsyncOpenSearch, opensearch_alias: str
) -> None:
    created = await ensure_index(opensearch_client, alias=opensearch_alias, shards=1, replicas=0)

    assert created == versioned_index_name(opensearch_alias) == f"{opensearch_alias}_-v{SCHEMA_VERSION}"
    aliases = await opensearch_client.indices.get_alias(name=opensearch_alias)
    assert list(aliases) == [created]
    mapping = await opensearch_client.indices.get_mapping(index=created)
    assert mapping[created]["mappings"]["_meta"] == {"schema_version": SCHEMA_VERSION}
    assert mapping[created]["mappings"]["properties"]["content"]["analyzer"] == TEXT_ANALYZER


async def test_replicas_starting_together_all_get_the_one_index(
    opensearch_client: AsyncOpenSearch, opensearch_alias: str
) -> None:
    names = await asyncio.gather(
        *(ensure_index(opensearch_client, alias=opensearch_alias, shards=1, replicas=0) for _ in range(3))
    )

    assert set(names) == {versioned_index_name(opensearch_alias)}
    assert list(await opensearch_client.indices.get_alias(name=opensearch_alias)) == [names[0]]


async def test_ensure_index_twice_verifies_and_changes_nothing(
    opensearch_client: AsyncOpenSearch, opensearch_alias: str
) -> None:
    alias = project_alias(opensearch_alias, PROJECT)
    first = await ensure_index(opensearch_client, alias=alias, shards=1, replicas=0)
    index = OpenSearchLexicalIndex(opensearch_client, index=opensearch_alias)
    await index_chunks(index, make_chunk("c-1", "survives a restart"))

    second = await ensure_index(opensearch_client, alias=alias, shards=1, replicas=0)

    assert first == second
    assert await search_ids(index, "restart") == ["c-1"]


async def test_ensure_index_moves_the_alias_from_an_older_version(
    opensearch_client: AsyncOpenSearch, opensearch_alias: str
) -> None:
    # A project index built by the previous schema version, holding one chunk, with the alias on it.
    alias = project_alias(opensearch_alias, PROJECT)
    old = versioned_index_name(alias, SCHEMA_VERSION - 1)
    old_body = index_body(shards=1, replicas=0)
    old_body["mappings"]["_meta"] = {"schema_version": SCHEMA_VERSION - 1}
    old_body["aliases"] = {alias: {}}
    await opensearch_client.indices.create(index=old, body=old_body)
    await index_chunks(
        OpenSearchLexicalIndex(opensearch_client, index=opensearch_alias), make_chunk("c-1", "carried over")
    )

    current = await ensure_index(opensearch_client, alias=alias, shards=1, replicas=0)

    assert list(await opensearch_client.indices.get_alias(name=alias)) == [current]
    assert await opensearch_client.indices.exists(index=old)  # kept for rollback
    index = OpenSearchLexicalIndex(opensearch_client, index=opensearch_alias)
    assert await search_ids(index, "carried") == ["c-1"]


async def test_a_version_7_index_moved_to_the_current_one_filters_its_tags_ignoring_case(
    opensearch_client: AsyncOpenSearch, opensearch_alias: str
) -> None:
    # Version 7 filtered on the tags as written: no `tags.key` sub-field, no `tag_key` normalizer.
    alias = project_alias(opensearch_alias, PROJECT)
    old_body = index_body(shards=1, replicas=0)
    del old_body["mappings"]["properties"]["tags"]["fields"]["key"]
    del old_body["settings"]["analysis"]["normalizer"]
    old_body["mappings"]["_meta"] = {"schema_version": 7}
    old_body["aliases"] = {alias: {}}
    await opensearch_client.indices.create(index=versioned_index_name(alias, 7), body=old_body)
    index = OpenSearchLexicalIndex(opensearch_client, index=opensearch_alias)
    await index_chunks(index, make_chunk("c-1", "carried over", tags=("Kubernetes",)))

    await ensure_index(opensearch_client, alias=alias, shards=1, replicas=0)

    tagged = Filters(project_id=PROJECT, tags=("kubernetes",))
    assert await search_ids(index, "carried", filters=tagged) == ["c-1"]


async def test_a_version_12_index_moved_to_the_current_one_finds_a_word_typed_without_its_diacritics(
    opensearch_client: AsyncOpenSearch, opensearch_alias: str
) -> None:
    # Version 12 analyzed Arabic harakat, Hebrew points and the Greek tonos as part of the word: `_reindex` into
    # the current index analyzes `_source` again, so a chunk written before the upgrade is found the new way.
    alias = project_alias(opensearch_alias, PROJECT)
    old_body = copy.deepcopy(index_body(shards=1, replicas=0))  # it shares the analyzer's dict with later calls
    analysis = old_body["settings"]["analysis"]
    analysis["char_filter"] = {
        name: char_filter for name, char_filter in analysis["char_filter"].items() if name in VERSION_12_CHAR_FILTERS
    }
    analysis["analyzer"][TEXT_ANALYZER]["char_filter"] = list(VERSION_12_CHAR_FILTERS)
    old_body["mappings"]["_meta"] = {"schema_version": 12}
    old_body["aliases"] = {alias: {}}
    await opensearch_client.indices.create(index=versioned_index_name(alias, 12), body=old_body)
    index = OpenSearchLexicalIndex(opensearch_client, index=opensearch_alias)
    await index_chunks(index, make_chunk("c-1", "ذَهَبَ مُحَمَّدٌ إِلَى المَكْتَبَةِ في Αθήνα"))
    assert await search_ids(index, "محمد") == []

    await ensure_index(opensearch_client, alias=alias, shards=1, replicas=0)

    assert await search_ids(index, "محمد") == ["c-1"]
    assert await search_ids(index, "αθηνα") == ["c-1"]


async def test_ensure_index_refuses_a_concrete_index_named_like_the_alias(
    opensearch_client: AsyncOpenSearch, opensearch_alias: str
) -> None:
    await opensearch_client.indices.create(index=opensearch_alias, body={})
    try:
        with pytest.raises(EngineUnavailableError, match="concrete index"):
            await ensure_index(opensearch_client, alias=opensearch_alias, shards=1, replicas=0)
    finally:
        await opensearch_client.indices.delete(index=opensearch_alias)


async def test_chunk_ids_equal_across_projects_do_not_collide(
    opensearch_client: AsyncOpenSearch, opensearch_alias: str
) -> None:
    index = OpenSearchLexicalIndex(opensearch_client, index=opensearch_alias)

    await index_chunks(
        index,
        make_chunk("same", "omicron alpha copy", project_id=PROJECT),
        make_chunk("same", "omicron beta copy", project_id="proj-beta"),
    )

    assert await search_ids(index, "omicron") == ["same"]
    hits = await index.search(LexicalQuery("omicron"), top_k=5, filters=Filters("proj-beta"))
    assert [hit.chunk.text for hit in hits] == ["omicron beta copy"]


async def test_the_last_entry_of_a_document_in_a_batch_wins(
    opensearch_client: AsyncOpenSearch, opensearch_alias: str
) -> None:
    index = OpenSearchLexicalIndex(opensearch_client, index=opensearch_alias)
    older = DocumentChunks(PROJECT, "d1", (make_chunk("v1", "iota first version", document_id="d1"),))
    newer = DocumentChunks(PROJECT, "d1", (make_chunk("v2", "iota second version", document_id="d1"),))

    await index.replace_documents([older, newer])

    assert await search_ids(index, "iota") == ["v2"]


# --- a scripted OpenSearch on loopback: headers, error bodies, status codes ----------------------


class ScriptedCluster:
    """A loopback HTTP server answering like OpenSearch with canned bodies, recording request headers.

    Not a mock of the driver: the real client sends real HTTP; only the far end is scripted.
    """

    def __init__(self) -> None:
        self.headers: list[dict[str, str]] = []
        self.status = 200
        self.body: dict[str, Any] = {}
        self.delay_s = 0.0

    async def handle(self, request: web.Request) -> web.Response:
        self.headers.append(dict(request.headers))
        await asyncio.sleep(self.delay_s)
        if request.path.endswith("/_settings") and self.status == 200:
            # The adapter checks the index generation before a write: one index, as a real cluster answers.
            alias = request.path.split("/")[1]
            return web.json_response({versioned_index_name(alias): {"settings": {"index": {"uuid": "scripted"}}}})
        return web.json_response(self.body, status=self.status)


@pytest.fixture
async def scripted() -> AsyncIterator[tuple[ScriptedCluster, AsyncOpenSearch]]:
    cluster = ScriptedCluster()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", cluster.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    client = create_opensearch_client(
        Settings(
            opensearch_url=f"http://127.0.0.1:{port}",
            opensearch_auth="forward_jwt",
            opensearch_username="svc",
            opensearch_password="svc-password",
            opensearch_max_retries=0,
            opensearch_timeout_s=2.0,
        )
    )
    yield cluster, client
    await client.close()
    await runner.cleanup()


EMPTY_SEARCH = {
    "took": 1,
    "timed_out": False,
    "_shards": {"total": 1, "successful": 1, "failed": 0},
    "hits": {"hits": []},
}


async def test_forwarded_jwt_is_sent_on_that_request_and_never_logged(
    scripted: tuple[ScriptedCluster, AsyncOpenSearch], caplog: pytest.LogCaptureFixture
) -> None:
    cluster, client = scripted
    cluster.body = EMPTY_SEARCH
    index = OpenSearchLexicalIndex(client, index="poimen-chunks", forward_jwt=True)
    token = "eyJhbGciOiJSUzI1NiJ9.caller-claims.caller-signature"
    caplog.set_level(logging.DEBUG)

    reset = forwarded_token.set(token)
    try:
        await index.search(LexicalQuery("anything"), top_k=5, filters=Filters(PROJECT))
    finally:
        forwarded_token.reset(reset)
    await index.search(LexicalQuery("anything"), top_k=5, filters=Filters(PROJECT))

    assert cluster.headers[0]["Authorization"] == f"Bearer {token}"
    assert cluster.headers[1]["Authorization"].startswith("Basic ")  # no caller token: service credentials
    assert token not in caplog.text


async def test_forwarding_is_off_unless_configured(scripted: tuple[ScriptedCluster, AsyncOpenSearch]) -> None:
    cluster, client = scripted
    cluster.body = EMPTY_SEARCH
    index = OpenSearchLexicalIndex(client, index="poimen-chunks", forward_jwt=False)

    reset = forwarded_token.set("caller-token")
    try:
        await index.search(LexicalQuery("anything"), top_k=5, filters=Filters(PROJECT))
    finally:
        forwarded_token.reset(reset)

    assert "caller-token" not in cluster.headers[0]["Authorization"]


async def test_429_becomes_unavailable(scripted: tuple[ScriptedCluster, AsyncOpenSearch]) -> None:
    cluster, client = scripted
    cluster.status = 429
    cluster.body = {
        "error": {
            "root_cause": [{"type": "rejected_execution_exception", "reason": "rejected execution"}],
            "type": "rejected_execution_exception",
            "reason": "rejected execution",
        },
        "status": 429,
    }
    index = OpenSearchLexicalIndex(client, index="poimen-chunks")

    with pytest.raises(EngineUnavailableError, match="429") as caught:
        await index.search(LexicalQuery("anything"), top_k=5, filters=Filters(PROJECT))

    assert caught.value.engine == "opensearch"


async def test_search_error_body_becomes_unavailable(scripted: tuple[ScriptedCluster, AsyncOpenSearch]) -> None:
    cluster, client = scripted
    cluster.status = 400
    cluster.body = {
        "error": {
            "root_cause": [{"type": "query_shard_exception", "reason": "failed to create query"}],
            "type": "search_phase_execution_exception",
            "reason": "all shards failed",
        },
        "status": 400,
    }
    index = OpenSearchLexicalIndex(client, index="poimen-chunks")

    with pytest.raises(EngineUnavailableError, match="search_phase_execution_exception"):
        await index.search(LexicalQuery("anything"), top_k=5, filters=Filters(PROJECT))


async def test_cluster_side_timeout_becomes_a_timeout(scripted: tuple[ScriptedCluster, AsyncOpenSearch]) -> None:
    cluster, client = scripted
    cluster.body = EMPTY_SEARCH | {"timed_out": True}
    index = OpenSearchLexicalIndex(client, index="poimen-chunks")

    with pytest.raises(EngineTimeoutError):
        await index.search(LexicalQuery("anything"), top_k=5, filters=Filters(PROJECT))


async def test_client_side_timeout_becomes_a_timeout(scripted: tuple[ScriptedCluster, AsyncOpenSearch]) -> None:
    cluster, client = scripted
    cluster.body = EMPTY_SEARCH
    cluster.delay_s = 1.0
    index = OpenSearchLexicalIndex(client, index="poimen-chunks", timeout_s=0.2)

    with pytest.raises(EngineTimeoutError):
        await index.search(LexicalQuery("anything"), top_k=5, filters=Filters(PROJECT))


async def test_bulk_item_failures_raise_so_nothing_is_marked_indexed(
    scripted: tuple[ScriptedCluster, AsyncOpenSearch],
) -> None:
    cluster, client = scripted
    cluster.body = {
        "took": 3,
        "errors": True,
        "items": [
            {
                "index": {
                    "_index": "poimen-chunks-v1",
                    "_id": "proj-alpha:c-1",
                    "status": 429,
                    "error": {"type": "rejected_execution_exception", "reason": "rejected execution of bulk"},
                }
            }
        ],
    }
    index = OpenSearchLexicalIndex(client, index="poimen-chunks")

    with pytest.raises(EngineUnavailableError, match="1 of 1 bulk items failed"):
        await index_chunks(index, make_chunk("c-1", "will be retried by the outbox"))


async def test_unreachable_cluster_is_unavailable() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again: nothing listens there
    client = create_opensearch_client(Settings(opensearch_url=f"http://127.0.0.1:{port}", opensearch_max_retries=0))
    index = OpenSearchLexicalIndex(client, index="poimen-chunks")
    try:
        with pytest.raises(EngineUnavailableError):
            await index.ping()
        with pytest.raises(EngineUnavailableError):
            await index.search(LexicalQuery("anything"), top_k=5, filters=Filters(PROJECT))
        with pytest.raises(EngineUnavailableError):
            await index_chunks(index, make_chunk("c-1", "kept in the outbox"))
    finally:
        await client.close()


# --- ranking: tantivy against Lucene-exact BM25 (noida-db) ---------------------------------------

RANKING_TOPICS = {
    "kubernetes": "kubernetes pod node restart deployment container scheduler namespace kubectl crash",
    "database": "postgres database backup restore replica query index vacuum transaction table",
    "network": "network latency packet dns timeout firewall route gateway socket connection",
    "security": "certificate expiry token secret vault rotation password audit access key",
    "memory": "memory leak heap worker garbage allocation process limit oom swap",
}
RANKING_FILLER = (
    "team",
    "service",
    "during",
    "after",
    "before",
    "check",
    "update",
    "log",
    "alert",
    "issue",
    "change",
    "night",
    "weekly",
)
RANKING_QUERIES = (
    "restart crashed pod",
    "database backup restore",
    "certificate expiry rotation",
    "memory leak worker process",
    "dns timeout latency",
    "postgres replica query",
)
RANKING_MIN_OVERLAP = 8


def ranking_corpus() -> list[str]:
    """48 short documents, seeded: one or two topics each, varied lengths and term frequencies."""
    generator = random.Random(20251130)
    topics = list(RANKING_TOPICS.values())
    documents = []
    for number in range(48):
        chosen = [topics[number % len(topics)]] + ([generator.choice(topics)] if number % 3 == 0 else [])
        vocabulary = [word for topic in chosen for word in topic.split()]
        length = generator.randint(6, 24)
        words = [
            generator.choice(vocabulary) if generator.random() < 0.6 else generator.choice(RANKING_FILLER)
            for _ in range(length)
        ]
        documents.append(" ".join(words))
    return documents


async def test_tantivy_top10_matches_lucene_bm25(noida_url: str, tmp_path: Path) -> None:
    texts = ranking_corpus()
    assert len(texts) <= 50  # noida-db scans linearly: keep it small
    corpus = [
        make_chunk(f"doc-{number:02d}", text, source="corpus/doc.txt", breadcrumb=())
        for number, text in enumerate(texts)
    ]
    client = AsyncOpenSearch(hosts=[noida_url], timeout=30)
    tantivy_index = TantivyLexicalIndex(tmp_path / "lexical")
    try:
        lucene_index = OpenSearchLexicalIndex(client, index="ranking", timeout_s=30)
        await index_chunks(lucene_index, *corpus)
        await index_chunks(tantivy_index, *corpus)

        overlaps: dict[str, int] = {}
        score_ratios: dict[str, float] = {}
        for query in RANKING_QUERIES:
            lucene_top = await search_hits(lucene_index, query, top_k=10)
            tantivy_top = await search_hits(tantivy_index, query, top_k=10)
            assert len(lucene_top) == len(tantivy_top) == 10, query
            overlaps[query] = len({hit.chunk_id for hit in lucene_top} & {hit.chunk_id for hit in tantivy_top})
            score_ratios[query] = tantivy_top[0].score / lucene_top[0].score
    finally:
        await tantivy_index.close()
        await client.close()

    print(f"tantivy vs Lucene BM25: top-10 overlap {overlaps}; top-1 score ratio {score_ratios}")  # noqa: T201
    assert all(shared >= RANKING_MIN_OVERLAP for shared in overlaps.values()), overlaps
    # Same scale (OpenSearch's LegacyBM25 = Lucene BM25 x (k1+1)), so weighted fusion sees like scores.
    assert all(ratio == pytest.approx(1.0, rel=0.05) for ratio in score_ratios.values()), score_ratios


async def test_fuzzy_keeps_the_exact_match_first_on_lucene_bm25(noida_url: str) -> None:
    client = AsyncOpenSearch(hosts=[noida_url], timeout=30)
    try:
        index = OpenSearchLexicalIndex(client, index="fuzzy", timeout_s=30)
        await index_chunks(
            index,
            make_chunk("c-exact", "the cluster has three nodes"),
            make_chunk("c-typo", "the clustre has three nodes"),
            make_chunk("c-other", "an unrelated sentence"),
        )

        fuzzy = await search_ids(index, "cluster", fuzzy=True)
        exact = await search_ids(index, "cluster", fuzzy=False)
    finally:
        await client.close()

    assert fuzzy == ["c-exact", "c-typo"]
    assert exact == ["c-exact"]


async def test_with_a_service_token_the_services_own_calls_carry_it_and_writes_never_forward() -> None:
    cluster = ScriptedCluster()
    cluster.body = EMPTY_SEARCH
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", cluster.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    settings = Settings(
        opensearch_url=f"http://127.0.0.1:{port}",
        opensearch_auth="forward_jwt",
        opensearch_service_token="service-token",
        opensearch_max_retries=0,
    )
    client = create_opensearch_client(settings)
    index = OpenSearchLexicalIndex(client, index="poimen-chunks", forward_jwt=True)
    reset = forwarded_token.set("caller-token")
    try:
        await index.search(LexicalQuery("anything"), top_k=5, filters=Filters(PROJECT))
        with contextlib.suppress(EngineUnavailableError):
            await index.ping()  # the scripted cluster answers every path with the search body
    finally:
        forwarded_token.reset(reset)
        await client.close()
        await runner.cleanup()

    assert cluster.headers[0]["Authorization"] == "Bearer caller-token"  # the search: the caller
    assert cluster.headers[1]["Authorization"] == "Bearer service-token"  # own work: the service


def test_forward_jwt_without_an_own_identity_stops_start_up() -> None:
    with pytest.raises(ValidationError, match="OPENSEARCH_SERVICE_TOKEN"):
        Settings(_env_file=None, opensearch_url="http://127.0.0.1:9200", opensearch_auth="forward_jwt")
