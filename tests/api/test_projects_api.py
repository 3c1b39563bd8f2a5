"""Memory management over HTTP on the real engines: listing with a cursor, stats, deletes, the `context` field.

Every 200 body is validated against the response schema the app publishes for its route, so the
OpenAPI document and the served shape cannot drift apart. Tests keep apart by project id.
"""

from __future__ import annotations

import asyncio
import base64
import time
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from tests.api.conftest import wait_indexed


def turn(document_id: str, **fields: Any) -> dict[str, Any]:
    return {
        "id": document_id,
        "source": f"chat/{document_id}",
        "title": f"Turn {document_id}",
        "text": f"Melanie said she painted a lake sunrise in turn {document_id}.",
        **fields,
    }


async def ingest(client, project: str, *documents: dict[str, Any]) -> None:
    response = await client.post(f"/v1/projects/{project}/documents", json={"documents": list(documents)})
    assert response.status_code == 201, response.text


@pytest.fixture(scope="module")
async def published(api_client) -> dict[str, Any]:
    response = await api_client.get("/schema/openapi.json")
    assert response.status_code == 200
    return response.json()


async def checked(client, published: dict[str, Any], method: str, path: str, route: str, **kwargs: Any) -> Any:
    """Call the route, assert 200, validate the body against the route's published 200 schema, return it."""
    response = await client.request(method.upper(), path, **kwargs)
    assert response.status_code == 200, response.text
    content = published["paths"][route][method]["responses"]["200"]["content"]["application/json"]["schema"]
    schema = {**content, "components": published["components"]}
    Draft202012Validator(schema).validate(response.json())
    return response.json()


async def test_listing_pages_with_a_cursor_and_never_repeats(api_client, published, unique_name) -> None:
    await ingest(api_client, unique_name, *(turn(f"t{n}") for n in range(5)))
    route = "/v1/projects/{project}/documents"

    pages, cursor = [], None
    while True:
        params = {"limit": 2} | ({"cursor": cursor} if cursor else {})
        page = await checked(
            api_client, published, "get", f"/v1/projects/{unique_name}/documents", route, params=params
        )
        pages.append([item["id"] for item in page["items"]])
        cursor = page["next_cursor"]
        if cursor is None:
            break

    assert pages == [["t0", "t1"], ["t2", "t3"], ["t4"]]


async def test_the_projects_listing_pages_every_project_that_holds_documents(
    api_client, published, unique_name
) -> None:
    first, second = f"{unique_name}-a", f"{unique_name}-b"
    await ingest(api_client, first, turn("t1"), turn("t2"))
    await ingest(api_client, second, turn("t1"))

    listed, cursor = [], None
    while True:
        params = {"limit": 2} | ({"cursor": cursor} if cursor else {})
        page = await checked(api_client, published, "get", "/v1/projects", "/v1/projects", params=params)
        assert len(page["items"]) <= 2
        listed.extend(item["project"] for item in page["items"])
        cursor = page["next_cursor"]
        if cursor is None:
            break
    documents_cursor = (await api_client.get(f"/v1/projects/{first}/documents", params={"limit": 1})).json()
    # The documents listing's cursor is another endpoint's: refused, not read as a project id.
    foreign = await api_client.get("/v1/projects", params={"cursor": documents_cursor["next_cursor"]})

    assert {first, second} <= set(listed)
    assert f"{unique_name}-never-written" not in listed
    assert listed == sorted(set(listed))  # by id, never repeated
    assert foreign.status_code == 400
    assert foreign.json()["field"] == "cursor"


async def test_listed_items_carry_ids_titles_sources_chunks_versions_and_times(api_client, unique_name) -> None:
    await ingest(api_client, unique_name, turn("t1", tags=["art"], event_time="2026-03-01T10:00:00Z"))

    response = await api_client.get(f"/v1/projects/{unique_name}/documents")

    [item] = response.json()["items"]
    assert (item["id"], item["title"], item["source"], item["tags"]) == ("t1", "Turn t1", "chat/t1", ["art"])
    assert item["chunks"] == 1
    assert item["version"] > 0
    assert item["event_time"].startswith("2026-03-01T10:00:00")
    assert {"created_at", "updated_at", "lexically_indexed"} <= set(item)


async def test_listing_filters_by_source_prefix_tag_event_time_and_update(api_client, unique_name) -> None:
    await ingest(
        api_client,
        unique_name,
        turn("a", source="chat/s1/a", tags=["x"], event_time="2026-03-01T00:00:00Z"),
        turn("b", source="chat/s2/b", tags=["y"], event_time="2026-03-05T00:00:00Z"),
    )

    async def ids(**params: str) -> list[str]:
        response = await api_client.get(f"/v1/projects/{unique_name}/documents", params=params)
        assert response.status_code == 200, response.text
        return [item["id"] for item in response.json()["items"]]

    assert await ids(source_prefix="chat/s1") == ["a"]
    assert await ids(tag="y") == ["b"]
    assert await ids(event_time_from="2026-03-02T00:00:00Z") == ["b"]
    assert await ids(event_time_to="2026-03-02T00:00:00") == ["a"]
    assert await ids(updated_since="2000-01-01T00:00:00Z") == ["a", "b"]
    assert await ids(updated_since="2999-01-01T00:00:00Z") == []


async def test_an_unknown_project_lists_and_counts_like_an_empty_one(api_client, published, unique_name) -> None:
    listing = await checked(
        api_client, published, "get", f"/v1/projects/{unique_name}/documents", "/v1/projects/{project}/documents"
    )
    stats = await checked(api_client, published, "get", f"/v1/projects/{unique_name}", "/v1/projects/{project}")

    assert listing == {"project": unique_name, "items": [], "next_cursor": None}
    assert {key: stats[key] for key in ("documents", "chunks", "lexically_indexed", "pending")} == dict.fromkeys(
        ("documents", "chunks", "lexically_indexed", "pending"), 0
    )
    assert stats["last_write_at"] is None


def _forged(raw: str) -> str:
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    "cursor",
    [
        "not-a-cursor!",
        "eyJrIjoic2VhcmNoIn0",
        "e30",
        "",
        _forged('{"k":"documents","after":"\\u0000"}'),  # PostgreSQL refuses a NUL: it read as an engine outage
        _forged('{"k":"documents","after":"\\ud800"}'),  # a lone surrogate, likewise
        _forged("[" * 3000)[:4096],  # nested past the JSON decoder's recursion limit: it was a 500
    ],
)
async def test_a_malformed_cursor_is_a_400_naming_the_cursor(api_client, unique_name, cursor: str) -> None:
    response = await api_client.get(f"/v1/projects/{unique_name}/documents", params={"cursor": cursor})

    assert response.status_code == 400, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    assert response.json()["field"] == "cursor"


@pytest.mark.parametrize(
    ("params", "field"),
    [({"limit": "0"}, "limit"), ({"limit": "5000"}, "limit"), ({"event_time_from": "yesterday"}, "event_time_from")],
)
async def test_bad_listing_parameters_are_400s_naming_them(api_client, unique_name, params, field) -> None:
    response = await api_client.get(f"/v1/projects/{unique_name}/documents", params=params)

    assert response.status_code == 400
    assert response.json()["field"] == field


async def test_stats_count_documents_chunks_and_the_lexical_backlog(api_client, published, unique_name) -> None:
    await ingest(api_client, unique_name, turn("t1"), turn("t2"))
    await wait_indexed(api_client, unique_name, "t1")
    await wait_indexed(api_client, unique_name, "t2")

    stats = await checked(api_client, published, "get", f"/v1/projects/{unique_name}", "/v1/projects/{project}")

    assert (stats["documents"], stats["chunks"], stats["lexically_indexed"], stats["pending"]) == (2, 2, 2, 0)
    assert stats["oldest_pending_age_s"] == 0.0
    assert stats["last_write_at"] is not None


async def lexical_ids(client, project: str, query: str) -> list[str]:
    response = await client.post("/v1/search", json={"query": query, "project": project, "strategy": "lexical"})
    assert response.status_code == 200, response.text
    return [hit["document_id"] for hit in response.json()["results"]]


async def wait_until_lexical_index_is_empty(client, project: str, query: str, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        stats = (await client.get(f"/v1/projects/{project}")).json()
        if stats["pending"] == 0:
            return
        await asyncio.sleep(0.05)
    msg = f"outbox of {project} not drained"
    raise AssertionError(msg)


async def test_deleting_a_project_empties_both_stores_and_the_cache(api_client, published, unique_name) -> None:
    await ingest(api_client, unique_name, turn("t1"), turn("t2"))
    await wait_indexed(api_client, unique_name, "t2")
    assert await lexical_ids(api_client, unique_name, "lake sunrise") != []  # now cached

    deleted = await checked(api_client, published, "delete", f"/v1/projects/{unique_name}", "/v1/projects/{project}")
    await wait_until_lexical_index_is_empty(api_client, unique_name, "lake sunrise")

    assert deleted == {"project": unique_name, "deleted": 2}
    assert (await api_client.get(f"/v1/projects/{unique_name}/documents")).json()["items"] == []
    assert await lexical_ids(api_client, unique_name, "lake sunrise") == []
    assert (await api_client.get(f"/v1/projects/{unique_name}")).json()["documents"] == 0


async def test_delete_by_source_prefix_removes_only_the_matching_documents(api_client, published, unique_name) -> None:
    await ingest(api_client, unique_name, turn("a", source="chat/s1/a"), turn("b", source="chat/s2/b"))

    deleted = await checked(
        api_client,
        published,
        "delete",
        f"/v1/projects/{unique_name}/documents",
        "/v1/projects/{project}/documents",
        params={"source_prefix": "chat/s1"},
    )
    await wait_until_lexical_index_is_empty(api_client, unique_name, "lake sunrise")

    assert deleted["deleted"] == 1
    assert [i["id"] for i in (await api_client.get(f"/v1/projects/{unique_name}/documents")).json()["items"]] == ["b"]
    assert await lexical_ids(api_client, unique_name, "lake sunrise") == ["b"]


async def test_delete_by_filter_without_a_filter_is_a_400(api_client, unique_name) -> None:
    await ingest(api_client, unique_name, turn("a"))

    response = await api_client.delete(f"/v1/projects/{unique_name}/documents")

    assert response.status_code == 400
    assert "filter" in response.json()["detail"]
    assert (await api_client.get(f"/v1/projects/{unique_name}")).json()["documents"] == 1


async def test_context_is_accepted_on_ingest_and_returned_by_get(api_client, unique_name) -> None:
    await ingest(api_client, unique_name, turn("t1", context="Caroline asked about painting."))

    response = await api_client.get(f"/v1/projects/{unique_name}/documents/t1")

    assert response.json()["context"] == "Caroline asked about painting."
    assert "Caroline" not in response.json()["chunks"][0]["text"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (turn("t1", colour="red"), "colour"),
        ({"documents": [turn("t1"), turn("t2", contxt="typo")]}, "documents[1].contxt"),
        ({"documents": [turn("t1")], "extra": 1}, "extra"),
    ],
)
async def test_unknown_fields_in_an_ingest_body_are_a_400_naming_the_field(
    api_client, unique_name, body, field
) -> None:
    response = await api_client.post(f"/v1/projects/{unique_name}/documents", json=body)

    assert response.status_code == 400, response.text
    assert response.json()["field"] == field
    assert (await api_client.get(f"/v1/projects/{unique_name}")).json()["documents"] == 0


async def test_overlapping_reindexes_each_answer_the_count_and_the_project_ends_indexed(
    api_client, published, unique_name
) -> None:
    await ingest(api_client, unique_name, turn("t1"), turn("t2"), turn("t3"))
    route = "/v1/projects/{project}/reindex"
    path = f"/v1/projects/{unique_name}/reindex"

    answers = await asyncio.gather(*(checked(api_client, published, "post", path, route) for _ in range(3)))
    unknown = await checked(api_client, published, "post", f"/v1/projects/{unique_name}-typo/reindex", route)
    await wait_until_lexical_index_is_empty(api_client, unique_name, "lake sunrise")

    assert answers == [{"project": unique_name, "queued_documents": 3}] * 3
    assert unknown == {"project": f"{unique_name}-typo", "queued_documents": 0}
    stats = (await api_client.get(f"/v1/projects/{unique_name}")).json()
    assert (stats["documents"], stats["lexically_indexed"], stats["pending"]) == (3, 3, 0)
    assert sorted(await lexical_ids(api_client, unique_name, "lake sunrise")) == ["t1", "t2", "t3"]


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("DELETE", "/v1/projects/{project}", {"tag": "draft"}),  # deleted the whole project
        ("DELETE", "/v1/projects/{project}/documents?source_prefix=chat/", {"tag": "draft"}),  # every chat/ one
        ("DELETE", "/v1/projects/{project}/documents/t1", {"expected_version": 99}),  # deleted at any version
        ("POST", "/v1/projects/{project}/reindex", {"project": "other"}),
    ],
)
async def test_a_body_sent_to_a_write_that_takes_none_is_a_400_and_nothing_is_done(
    api_client, unique_name, method: str, path: str, body: dict[str, Any]
) -> None:
    await ingest(api_client, unique_name, turn("t1"), turn("t2", tags=["draft"]))
    await wait_indexed(api_client, unique_name, "t2")
    url = path.format(project=unique_name)

    response = await api_client.request(method, url, json=body)

    assert response.status_code == 400, response.text
    assert response.json()["field"] == "body"
    assert f"{method} {url.split('?')[0]} takes no request body" in response.json()["detail"]
    stats = (await api_client.get(f"/v1/projects/{unique_name}")).json()
    assert (stats["documents"], stats["pending"]) == (2, 0)
    answers = [  # no body, or one that asks for nothing: as before (a deleted document is then a 404)
        await api_client.request(method, url, content=nothing, headers={"content-type": "application/json"})
        for nothing in (b"", b"{}", b" null ")
    ]
    assert answers[0].status_code in {200, 204}, answers[0].text
    assert all(answer.status_code in {200, 204, 404} for answer in answers), [answer.text for answer in answers]
