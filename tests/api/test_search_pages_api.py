"""Paged search and batch search over HTTP on the real engines.

Pages are slices of one ranking: walking the cursors gives the full ranking once, with no repeats, even
when the project changes between pages. A batch answers like the single searches, in order, and embeds
its queries in one call (counted by a delegating embedder around the session model).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from jsonschema import Draft202012Validator

from app.api.cursors import decode_cursor, encode_cursor
from app.config import SEARCH_BATCH_MAX_QUERIES_CEILING
from tests.api.conftest import api_settings, app_client, build_engines, wait_indexed

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence

    from app.engines.embedder import ServingEmbedder

TOPICS = ["lake", "mountain", "forest", "river", "desert", "ocean", "city", "garden", "harbour", "meadow", "glacier"]
BATCH_LIMIT = 4


class CountingEmbedder:
    """The session model, counting the calls each search path makes."""

    def __init__(self, inner: ServingEmbedder) -> None:
        self._inner = inner
        self.name, self.model_name, self.dimensions = inner.name, inner.model_name, inner.dimensions
        self.query_calls = 0
        self.batches: list[int] = []

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return await self._inner.embed_documents(texts)

    async def embed_query(self, text: str, *, scope: str = "") -> list[float]:
        self.query_calls += 1
        return await self._inner.embed_query(text, scope=scope)

    async def embed_queries(self, texts: Sequence[str], *, scope: str = "") -> list[list[float]]:
        self.batches.append(len(texts))
        return await self._inner.embed_queries(texts, scope=scope)


@pytest.fixture(scope="module")
async def counting(embedder) -> CountingEmbedder:
    return CountingEmbedder(embedder)


@pytest.fixture(scope="module")
async def client(api_postgres_url: str, counting: CountingEmbedder, tmp_path_factory) -> AsyncIterator[Any]:
    data_dir = tmp_path_factory.mktemp("search_pages")
    settings = api_settings(data_dir, search_batch_max_queries=BATCH_LIMIT)
    async with (
        build_engines(database_url=api_postgres_url, lexical_path=data_dir / "lexical", embedder=counting) as built,
        app_client(built.app(settings)) as test_client,
    ):
        yield test_client


@pytest.fixture(scope="module")
async def project(client) -> str:
    name = "pages-corpus"
    documents = [
        {"id": f"d{n:02}", "title": f"Painting {topic}", "text": f"She painted a {topic} at sunrise, day {n}."}
        for n, topic in enumerate(TOPICS)
    ]
    response = await client.post(f"/v1/projects/{name}/documents", json={"documents": documents})
    assert response.status_code == 201, response.text
    for document in documents:
        await wait_indexed(client, name, document["id"])
    return name


@pytest.fixture(scope="module")
async def validator(client) -> Draft202012Validator:
    document = (await client.get("/schema/openapi.json")).json()
    return Draft202012Validator(
        {**document["components"]["schemas"]["SearchResponse"], "components": document["components"]}
    )


async def search(client, body: dict[str, Any], validator=None) -> dict[str, Any]:
    response = await client.post("/v1/search", json=body)
    assert response.status_code == 200, response.text
    if validator is not None:
        validator.validate(response.json())
    return response.json()


async def walk(client, body: dict[str, Any], validator) -> list[list[str]]:
    pages, cursor = [], None
    first = True
    while first or cursor:
        paging = {"offset": 0} if first else {"cursor": cursor}
        page = await search(client, body | paging, validator)
        pages.append([hit["id"] for hit in page["results"]])
        cursor, first = page["next_cursor"], False
    return pages


async def test_cursor_pages_cover_one_ranking_without_repeats(client, project, validator) -> None:
    body = {"query": "painted sunrise", "project": project, "limit": 4}
    whole = await search(client, body | {"limit": 100, "offset": 0})

    pages = await walk(client, body, validator)

    flat = [chunk_id for page in pages for chunk_id in page]
    assert len(flat) == len(set(flat)) == len(TOPICS)
    assert flat == [hit["id"] for hit in whole["results"]]
    assert [len(page) for page in pages] == [4, 4, 3]


async def test_ranks_continue_across_pages(client, project) -> None:
    body = {"query": "painted sunrise", "project": project, "limit": 4}

    second = await search(client, body | {"offset": 4})

    assert [hit["rank"] for hit in second["results"]] == [5, 6, 7, 8]
    assert second["offset"] == 4


async def test_a_write_between_pages_does_not_repeat_or_skip_a_hit(client, project) -> None:
    body = {"query": "painted lake garden", "project": project, "limit": 5}
    first = await search(client, body | {"offset": 0})
    added = {"id": "zz-new", "title": "Painting lake garden", "text": "She painted a lake garden at sunrise."}
    assert (await client.post(f"/v1/projects/{project}/documents", json=added)).status_code == 201

    second = await search(client, body | {"cursor": first["next_cursor"]})

    seen = [hit["id"] for hit in first["results"] + second["results"]]
    assert len(seen) == len(set(seen))
    assert "zz-new#0" not in seen  # the ranking the first page was cut from
    assert (await client.delete(f"/v1/projects/{project}/documents/zz-new")).status_code == 204


async def test_a_later_page_never_serves_what_was_deleted_or_retagged_since_its_first(client) -> None:
    project = "pages-forgotten"
    documents = [
        {"id": f"p{n}", "text": f"Phone number of contact {n} is 555-010{n}.", "tags": ["contacts"]} for n in range(6)
    ]
    created = await client.post(f"/v1/projects/{project}/documents", json={"documents": documents})
    assert created.status_code == 201, created.text
    for document in documents:
        await wait_indexed(client, project, document["id"])
    body = {"query": "phone number", "project": project, "limit": 2, "filters": {"tags": ["contacts"]}}
    first = await search(client, body | {"offset": 0})
    whole = await search(client, body | {"limit": 100, "offset": 0})
    later = [hit["document_id"] for hit in whole["results"][2:]]
    deleted, retagged = later[0], later[1]
    assert (await client.delete(f"/v1/projects/{project}/documents/{deleted}")).status_code == 204
    moved = {"id": retagged, "text": f"Phone number of contact {retagged[1:]} is 555-010{retagged[1:]}.", "tags": []}
    assert (await client.post(f"/v1/projects/{project}/documents", json=moved)).status_code == 200  # an update

    second = await search(client, body | {"cursor": first["next_cursor"]})
    rest = await search(client, body | {"cursor": second["next_cursor"]}) if second["next_cursor"] else None

    served = [hit["document_id"] for page in (first, second, rest) if page for hit in page["results"]]
    assert deleted not in served
    assert retagged not in served  # its tags no longer meet the filter
    assert len(served) == len(set(served))
    assert len(second["results"]) == 2  # filled from the hits after the two left out
    assert set(served) == {document["id"] for document in documents} - {deleted, retagged}
    assert (await client.delete(f"/v1/projects/{project}")).status_code == 200
    after_project_delete = await search(client, body | {"cursor": first["next_cursor"]})
    assert after_project_delete["results"] == []


async def test_a_later_page_on_another_replica_reads_the_query_as_its_first_page_did(
    client, api_postgres_url, counting, tmp_path
) -> None:
    # Two apps on one database are two replicas. Each reads a project's speakers (the common title names the
    # semantic query leaves out) on its own, kept 5 minutes: the first replica read them before the speakers'
    # turns were written, so the other one cut the second page from another ranking at the same generation,
    # repeating and skipping hits while saying `ranking_changed: false`. Semantic only: each app has a tantivy
    # folder of its own, and nothing is queued while both run.
    project = "pages-speakers"
    notes = [{"id": f"n{n}", "title": f"notes {n}", "text": f"A quiet harbour evening, note {n}."} for n in range(12)]
    assert (await client.post(f"/v1/projects/{project}/documents", json={"documents": notes})).status_code == 201
    body = {"query": "What did Caroline bake?", "project": project, "limit": 4, "strategy": "semantic"}
    await search(client, body)  # this replica reads the titles now: nobody is named in them yet
    turns = [
        {
            "id": f"t{n:02}",
            "title": f"1:56 pm on {n} May, 2023 | Caroline",
            "text": "Caroline said hello to everyone." if n % 2 else f"I baked rye bread, loaf {n}.",
        }
        for n in range(24)
    ]
    assert (await client.post(f"/v1/projects/{project}/documents", json={"documents": turns})).status_code == 201
    for turn in turns:  # the outbox's indexing moves the generation on too: page at the last one
        await wait_indexed(client, project, turn["id"])
    first = await search(client, body | {"offset": 0})
    second_here = await search(client, body | {"cursor": first["next_cursor"]})
    data_dir = tmp_path / "other-replica"
    async with (
        build_engines(database_url=api_postgres_url, lexical_path=data_dir / "lexical", embedder=counting) as built,
        app_client(built.app(api_settings(data_dir))) as other_replica,
    ):
        second_there = await search(other_replica, body | {"cursor": first["next_cursor"]})

    assert second_there["ranking_changed"] is False
    assert [hit["id"] for hit in second_there["results"]] == [hit["id"] for hit in second_here["results"]]
    assert {hit["id"] for hit in first["results"]}.isdisjoint(hit["id"] for hit in second_there["results"])
    assert (await client.delete(f"/v1/projects/{project}")).status_code == 200


@pytest.mark.parametrize("speakers", ["caroline", [1], {"caroline": True}])
async def test_a_cursor_whose_speakers_are_not_a_list_of_names_is_a_400(client, project, speakers) -> None:
    body = {"query": "painted lake", "project": project, "limit": 2}
    values = decode_cursor((await search(client, body | {"offset": 0}))["next_cursor"], kind="search")

    response = await client.post(
        "/v1/search", json=body | {"cursor": encode_cursor("search", values | {"s": speakers})}
    )

    assert response.status_code == 400
    assert response.json()["field"] == "cursor"


async def test_get_memory_query_pages_with_offset_and_cursor(client, project) -> None:
    params = {"query": "painted sunrise", "project": project, "limit": "6"}
    first = (await client.get("/memory/query", params=params | {"offset": "0"})).json()

    second = (await client.get("/memory/query", params=params | {"cursor": first["next_cursor"]})).json()

    assert [hit["rank"] for hit in second["results"]] == [7, 8, 9, 10, 11]
    assert second["next_cursor"] is None
    assert not {hit["id"] for hit in first["results"]} & {hit["id"] for hit in second["results"]}


async def test_an_unpaged_search_has_no_cursor(client, project) -> None:
    answer = await search(client, {"query": "painted sunrise", "project": project, "limit": 2})

    assert answer["next_cursor"] is None
    assert answer["offset"] == 0


@pytest.mark.parametrize(
    ("paging", "field"),
    [
        ({"cursor": "%%%"}, "cursor"),
        ({"cursor": "eyJrIjoiZG9jdW1lbnRzIiwiYWZ0ZXIiOiJ4In0"}, "cursor"),  # a listing's cursor
        ({"offset": -1}, "offset"),
        ({"offset": 100}, "offset"),
    ],
)
async def test_bad_paging_is_a_400_naming_the_field(client, project, paging, field) -> None:
    response = await client.post("/v1/search", json={"query": "lake", "project": project} | paging)

    assert response.status_code == 400, response.text
    assert response.json()["field"] == field


async def test_a_cursor_replayed_with_another_query_is_refused(client, project) -> None:
    first = await search(client, {"query": "painted sunrise", "project": project, "limit": 2, "offset": 0})

    response = await client.post(
        "/v1/search", json={"query": "forest", "project": project, "cursor": first["next_cursor"]}
    )

    assert response.status_code == 400
    assert response.json()["field"] == "cursor"


async def test_batch_answers_each_query_in_order_like_a_single_search(client, project, validator) -> None:
    queries = [{"query": "glacier"}, {"query": "harbour", "strategy": "lexical"}, {"query": "meadow", "limit": 2}]

    response = await client.post("/v1/search/batch", json={"project": project, "queries": queries})

    assert response.status_code == 200, response.text
    answers = response.json()["results"]
    for answer in answers:
        validator.validate(answer)
    singles = [await search(client, {"project": project, **query}) for query in queries]
    assert [a["query"] for a in answers] == ["glacier", "harbour", "meadow"]
    assert [[h["id"] for h in a["results"]] for a in answers] == [[h["id"] for h in s["results"]] for s in singles]


async def test_batch_embeds_its_queries_in_one_call(client, project, counting) -> None:
    counting.batches.clear()
    calls_before = counting.query_calls
    queries = [{"query": f"painted {topic} batch"} for topic in ("lake", "river", "ocean")]

    response = await client.post("/v1/search/batch", json={"project": project, "queries": queries})

    assert response.status_code == 200, response.text
    assert counting.batches == [3]
    assert counting.query_calls == calls_before


async def test_batch_over_the_limit_is_a_400_naming_queries(client, project) -> None:
    queries = [{"query": f"q{n}"} for n in range(BATCH_LIMIT + 1)]

    response = await client.post("/v1/search/batch", json={"project": project, "queries": queries})

    assert response.status_code == 400
    assert response.json()["field"] == "queries"


async def test_a_batch_past_the_schemas_bound_is_refused_by_its_count_before_its_items_are_read(
    client, project
) -> None:
    # Every item is invalid: had they been decoded first (3,000,000 of them held 1.1 GB), an item would be blamed.
    queries = [{"query": 5}] * (SEARCH_BATCH_MAX_QUERIES_CEILING + 1)

    response = await client.post("/v1/search/batch", json={"project": project, "queries": queries})

    assert response.status_code == 400
    assert response.json()["field"] == "queries"
    assert response.json()["detail"] == f"queries: must hold at most {SEARCH_BATCH_MAX_QUERIES_CEILING} items"


@pytest.mark.parametrize(
    ("queries", "field"),
    [
        ([{"query": "lake"}, {"query": "  "}], "queries[1].query"),
        ([{"query": "lake", "project": "other"}], "queries[0].project"),
        (
            [{"query": "lake"}, {"query": "lake", "weights": {"semantic": 0, "lexical": 0}}],
            "queries[1].weights.semantic",
        ),
        ([{"query": "lake", "filters": {"tags": ["a\u0000"]}}], "queries[0].filters.tags[0]"),
        ([{"query": "lake"}, {"query": "lake", "strategy": "Hybrid"}], "queries[1].strategy"),
        ([], "queries"),
    ],
)
async def test_a_bad_query_fails_the_batch_naming_it(client, project, queries, field) -> None:
    response = await client.post("/v1/search/batch", json={"project": project, "queries": queries})

    assert response.status_code == 400, response.text
    assert response.json()["field"] == field
