"""The documents API on the real engines: write, read, replace, delete, and reject bad input whole.

One app per module on the session PostgreSQL and model, with small limits so the limit checks are
cheap (`max_document_bytes`, `max_batch_documents`). Tests keep apart by project id.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import TYPE_CHECKING, Any

import pytest

from tests.api.conftest import api_settings, app_client, build_engines, wait_indexed

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from litestar import Litestar
    from litestar.testing import AsyncTestClient

    from app.engines.embedder import ServingEmbedder

MAX_DOCUMENT_BYTES = 4000
MAX_BATCH_DOCUMENTS = 5

RUNBOOK = (
    "# Kubernetes\n\nIntro text about clusters and the way our team runs them.\n\n"
    "## Port forwarding\n\nUse kubectl port-forward service/web 8080:80 to reach a pod from a laptop.\n\n"
    "## Port conflicts\n\nIf port 8080 is taken, find the process with lsof and stop it before retrying.\n\n"
    "## Quokka section\n\nThe quokka alarm fires when the zanzibar gateway drops more than half its packets.\n"
)


@pytest.fixture(scope="module")
async def client(
    api_postgres_url: str, embedder: ServingEmbedder, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[AsyncTestClient[Litestar]]:
    data_dir = tmp_path_factory.mktemp("documents_api")
    settings = api_settings(data_dir, max_document_bytes=MAX_DOCUMENT_BYTES, max_batch_documents=MAX_BATCH_DOCUMENTS)
    async with (
        build_engines(database_url=api_postgres_url, lexical_path=data_dir / "lexical", embedder=embedder) as built,
        app_client(built.app(settings)) as test_client,
    ):
        yield test_client


def doc(document_id: str, text: str = RUNBOOK, **fields: Any) -> dict[str, Any]:
    return {"id": document_id, "title": "Networking", "source": f"runbooks/{document_id}.md", "text": text, **fields}


async def post(client: Any, project: str, body: Any) -> Any:
    return await client.post(f"/v1/projects/{project}/documents", json=body)


async def search_ids(client: Any, project: str, query: str, *, strategy: str) -> list[str]:
    response = await client.post("/v1/search", json={"query": query, "project": project, "strategy": strategy})
    assert response.status_code == 200, response.text
    return [hit["id"] for hit in response.json()["results"]]


async def wait_until_lexical(client: Any, project: str, query: str, predicate: Any, *, timeout_s: float = 10.0) -> None:
    """Poll a lexical search until `predicate(hit ids)` holds: the outbox works in the background."""
    deadline = time.monotonic() + timeout_s
    ids: list[str] = []
    while time.monotonic() < deadline:
        ids = await search_ids(client, project, query, strategy="lexical")
        if predicate(ids):
            return
        await asyncio.sleep(0.05)
    msg = f"lexical search for {query!r} still returns {ids} after {timeout_s} s"
    raise AssertionError(msg)


def assert_problem(response: Any, status: int | None = None) -> dict[str, Any]:
    assert 400 <= response.status_code < 500, (response.status_code, response.text)
    if status is not None:
        assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body: dict[str, Any] = response.json()
    assert body["status"] == response.status_code
    assert body["detail"].strip()
    return body


# ------------------------------------------------------------------------------------------------ writes


async def test_post_one_document_answers_201_with_its_outcome(client, unique_name) -> None:
    response = await post(client, unique_name, doc("runbook-1"))

    assert response.status_code == 201, response.text
    body = response.json()
    assert body["project"] == unique_name
    [outcome] = body["documents"]
    assert outcome["id"] == "runbook-1"
    assert outcome["status"] == "created"
    assert outcome["chunks"] == 4
    assert outcome["embedded"] == 4


async def test_post_a_batch_answers_one_outcome_per_document_in_order(client, unique_name) -> None:
    batch = {"documents": [doc("b"), doc("a", "Short note about the weekly backup rotation and its checks.")]}

    response = await post(client, unique_name, batch)

    assert response.status_code == 201, response.text
    outcomes = response.json()["documents"]
    assert [(o["id"], o["status"], o["chunks"]) for o in outcomes] == [("b", "created", 4), ("a", "created", 1)]


async def test_get_shows_chunks_in_order_with_breadcrumbs_and_levels(client, unique_name) -> None:
    await post(client, unique_name, doc("runbook-1", tags=["networking"]))

    response = await client.get(f"/v1/projects/{unique_name}/documents/runbook-1")

    assert response.status_code == 200, response.text
    body = response.json()
    assert body["id"] == "runbook-1"
    assert body["project"] == unique_name
    assert body["tags"] == ["networking"]
    chunks = body["chunks"]
    assert [c["position"] for c in chunks] == [0, 1, 2, 3]
    assert [c["id"] for c in chunks] == [f"runbook-1#{p}" for p in range(4)]
    assert [c["breadcrumb"] for c in chunks] == [
        ["Networking", "Kubernetes"],
        ["Networking", "Kubernetes", "Port forwarding"],
        ["Networking", "Kubernetes", "Port conflicts"],
        ["Networking", "Kubernetes", "Quokka section"],
    ]
    assert [c["section_title"] for c in chunks] == ["Kubernetes", "Port forwarding", "Port conflicts", "Quokka section"]
    assert chunks[0]["level"] != chunks[1]["level"]
    assert chunks[1]["level"] == chunks[2]["level"] == chunks[3]["level"]
    assert "lsof" in chunks[2]["text"]


async def test_reingesting_an_unchanged_document_changes_and_embeds_nothing(client, unique_name) -> None:
    await post(client, unique_name, doc("runbook-1"))
    before = (await client.get(f"/v1/projects/{unique_name}/documents/runbook-1")).json()

    again = await post(client, unique_name, doc("runbook-1"))

    after = (await client.get(f"/v1/projects/{unique_name}/documents/runbook-1")).json()
    [outcome] = again.json()["documents"]
    assert again.status_code == 200  # nothing created (test_write_answers)
    assert (outcome["status"], outcome["embedded"], outcome["chunks"]) == ("unchanged", 0, 4)
    assert [c["id"] for c in after["chunks"]] == [c["id"] for c in before["chunks"]]
    assert [c["chunk_hash"] for c in after["chunks"]] == [c["chunk_hash"] for c in before["chunks"]]
    assert after["updated_at"] == before["updated_at"]


async def test_changed_document_replaces_exactly_its_chunks_and_embeds_only_new_text(client, unique_name) -> None:
    await post(client, unique_name, doc("runbook-1"))
    await post(client, unique_name, doc("other", "An unrelated note that mentions the quokka alarm in passing only."))
    await wait_indexed(client, unique_name, "runbook-1")
    await wait_indexed(client, unique_name, "other")
    changed = RUNBOOK.split("## Quokka section", maxsplit=1)[0].replace("before retrying", "and then retry the deploy")

    response = await post(client, unique_name, doc("runbook-1", changed))

    [outcome] = response.json()["documents"]
    assert (outcome["status"], outcome["chunks"], outcome["embedded"]) == ("updated", 3, 1)
    chunks = (await client.get(f"/v1/projects/{unique_name}/documents/runbook-1")).json()["chunks"]
    assert [c["section_title"] for c in chunks] == ["Kubernetes", "Port forwarding", "Port conflicts"]
    assert "retry the deploy" in chunks[2]["text"]
    assert all("zanzibar" not in c["text"] for c in chunks)
    await wait_indexed(client, unique_name, "runbook-1")
    assert await search_ids(client, unique_name, "zanzibar gateway", strategy="lexical") == []
    assert "runbook-1#3" not in await search_ids(client, unique_name, "quokka alarm zanzibar", strategy="semantic")
    assert await search_ids(client, unique_name, "quokka", strategy="lexical") == ["other#0"]
    assert (await client.get(f"/v1/projects/{unique_name}/documents/other")).status_code == 200


async def test_chunk_text_already_embedded_elsewhere_is_not_embedded_again(client, unique_name) -> None:
    await post(client, unique_name, doc("first"))

    response = await post(client, unique_name, {"documents": [doc("second"), doc("third")]})

    outcomes = response.json()["documents"]
    assert [(o["status"], o["embedded"]) for o in outcomes] == [("created", 0), ("created", 0)]


async def test_delete_answers_204_then_the_document_is_gone_from_both_legs(client, unique_name) -> None:
    await post(client, unique_name, doc("runbook-1"))
    await wait_indexed(client, unique_name, "runbook-1")
    assert await search_ids(client, unique_name, "zanzibar", strategy="lexical") == ["runbook-1#3"]

    deleted = await client.delete(f"/v1/projects/{unique_name}/documents/runbook-1")

    assert deleted.status_code == 204
    assert (await client.get(f"/v1/projects/{unique_name}/documents/runbook-1")).status_code == 404
    assert await search_ids(client, unique_name, "zanzibar gateway packets", strategy="semantic") == []
    await wait_until_lexical(client, unique_name, "zanzibar", lambda ids: ids == [])
    assert_problem(await client.delete(f"/v1/projects/{unique_name}/documents/runbook-1"), 404)


async def test_document_ids_with_slashes_work_for_get_and_delete(client, unique_name) -> None:
    document_id = "runbooks/k8s/networking.md"
    created = await post(client, unique_name, doc(document_id))

    fetched = await client.get(f"/v1/projects/{unique_name}/documents/{document_id}")
    deleted = await client.delete(f"/v1/projects/{unique_name}/documents/{document_id}")

    assert created.status_code == 201
    assert fetched.status_code == 200
    assert fetched.json()["id"] == document_id
    assert fetched.json()["chunks"][0]["id"] == f"{document_id}#0"
    assert deleted.status_code == 204
    assert (await client.get(f"/v1/projects/{unique_name}/documents/{document_id}")).status_code == 404


@pytest.mark.parametrize(
    ("document_id", "path"),
    [("runbook-1", "runbook-1"), ("runbooks/k8s/net work.md", "runbooks/k8s/net%20work.md"), ("50%", "50%25")],
)
async def test_a_one_document_write_answers_where_the_document_is_and_a_batch_does_not(
    client, unique_name, document_id, path
) -> None:
    # A 201 without `Location` names the target, the collection, as what it created (RFC 9110 15.3.2).
    created = await post(client, unique_name, doc(document_id))
    unchanged = await post(client, unique_name, doc(document_id))
    batch = await post(client, unique_name, {"documents": [doc(document_id), doc("other")]})

    location = f"/v1/projects/{unique_name}/documents/{path}"
    assert (created.headers.get("location"), unchanged.headers.get("location")) == (location, location)
    assert (await client.get(location)).json()["id"] == document_id
    assert "location" not in batch.headers


async def test_get_of_an_unknown_document_is_a_404_problem(client, unique_name) -> None:
    response = await client.get(f"/v1/projects/{unique_name}/documents/nope")

    assert "nope" in assert_problem(response, 404)["detail"]


# ------------------------------------------------------------------------------------------- bad input


async def test_malformed_json_is_a_400_problem(client, unique_name) -> None:
    response = await client.post(
        f"/v1/projects/{unique_name}/documents", content=b'{"id":', headers={"content-type": "application/json"}
    )

    assert "JSON" in assert_problem(response, 400)["detail"]


def nested(levels: int) -> object:
    """An object `levels` deep: lists within one another inside the top object."""
    value: object = []
    for _ in range(levels - 2):
        value = [value]
    return {"k": value}


async def test_a_body_nested_past_what_the_decoder_reads_is_a_400_problem(client, unique_name) -> None:
    depth = 5000  # msgspec stops near 1,000 levels (a RecursionError was a 500)
    body = b'{"id": "deep", "text": "fine", "metadata": {"k": ' + b"[" * depth + b"]" * depth + b"}}"

    response = await client.post(
        f"/v1/projects/{unique_name}/documents", content=body, headers={"content-type": "application/json"}
    )

    problem = assert_problem(response, 400)
    assert (problem["field"], "nests too deeply" in problem["detail"]) == ("body", True)


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        pytest.param({"text": "A document without an id at all."}, "id", id="missing-id"),
        pytest.param({"id": "x", "title": "No body"}, "text", id="missing-text"),
        pytest.param({"id": "x", "text": ""}, "text", id="empty-text"),
        pytest.param({"id": "x", "text": " \n\t "}, "text", id="whitespace-text"),
        pytest.param({"id": "x", "text": "nul \x00 inside"}, "text", id="nul-in-text"),
        pytest.param({"id": "x", "text": "fine", "title": "nul\x00"}, "title", id="nul-in-title"),
        pytest.param({"id": "x", "text": "fine", "metadata": {"k": "v\x00"}}, "metadata", id="nul-in-metadata"),
        pytest.param({"id": 5, "text": "fine"}, "id", id="id-not-a-string"),
        pytest.param({"id": "x", "text": 12}, "text", id="text-not-a-string"),
        pytest.param({"id": "x", "text": "fine", "tags": "one"}, "tags", id="tags-not-a-list"),
        pytest.param({"id": "x", "text": "fine", "tags": ["ops", " \t"]}, "tags", id="blank-tag"),
        pytest.param({"id": "x", "text": "fine", "event_time": "yesterday"}, "event_time", id="bad-event-time"),
        pytest.param({"id": "x", "text": "fine", "metadata": nested(33)}, "metadata", id="metadata-33-deep"),
        pytest.param(
            {"id": "x", "text": "fine", "event_time": "0001-01-01T00:00:00+01:00"}, "event_time", id="year-0-in-utc"
        ),
        pytest.param(
            {"id": "x", "text": "fine", "event_time": "0001-01-01T00:00:00Z"}, "event_time", id="stored-as-infinity"
        ),
        pytest.param({"id": "", "text": "fine"}, "id", id="empty-id"),
        pytest.param({"id": "a/../b", "text": "fine"}, "id", id="dot-dot-in-id"),
        pytest.param({"id": "a//b", "text": "fine"}, "id", id="double-slash-in-id"),
        pytest.param({"id": "notes/", "text": "fine"}, "id", id="trailing-slash-in-id"),
    ],
)
async def test_bad_document_is_rejected_with_the_whole_batch(client, unique_name, bad, field) -> None:
    good = doc("good-one", "A perfectly fine document that must not be written alone.")

    single = await post(client, unique_name, bad)
    batch = await post(client, unique_name, {"documents": [good, bad]})

    assert_problem(single, 400)
    body = assert_problem(batch, 400)
    assert field in (body.get("field") or "") + body["detail"]
    assert (await client.get(f"/v1/projects/{unique_name}/documents/good-one")).status_code == 404


async def test_metadata_32_levels_deep_is_stored(client, unique_name) -> None:
    written = await post(client, unique_name, {"id": "deep", "text": "fine", "metadata": nested(32)})

    assert written.status_code == 201, written.text
    stored = await client.get(f"/v1/projects/{unique_name}/documents/deep")
    assert stored.json()["metadata"] == nested(32)


async def test_tags_differing_only_in_case_are_stored_once_as_first_spelt(client, unique_name) -> None:
    written = await post(client, unique_name, doc("tagged", tags=["SRE", "db", "sre", "Sre"]))

    stored = await client.get(f"/v1/projects/{unique_name}/documents/tagged")

    assert written.status_code == 201, written.text
    assert stored.json()["tags"] == ["SRE", "db"]


FRONT_MATTER_NOTE = """---
title: Disk alerts
tags: [sre, disks]
date: 2024-03-05T09:30:00+01:00
owner: ops
---
# Disk alerts

Page the storage on-call when a volume passes 90 percent.
"""


async def test_front_matter_fills_the_fields_a_request_leaves_empty_as_the_cli_reads_a_file(
    client, unique_name
) -> None:
    bare = await post(client, unique_name, {"id": "bare", "text": FRONT_MATTER_NOTE})
    given = await post(
        client,
        unique_name,
        {"id": "given", "text": FRONT_MATTER_NOTE, "title": "Mine", "tags": ["mine"], "metadata": {"owner": "me"}},
    )

    read_bare = (await client.get(f"/v1/projects/{unique_name}/documents/bare")).json()
    read_given = (await client.get(f"/v1/projects/{unique_name}/documents/given")).json()

    assert (bare.status_code, given.status_code) == (201, 201), (bare.text, given.text)
    assert (read_bare["title"], read_bare["tags"]) == ("Disk alerts", ["sre", "disks"])
    assert read_bare["event_time"].startswith("2024-03-05T08:30:00")
    assert read_bare["metadata"] == {
        "title": "Disk alerts",
        "tags": ["sre", "disks"],
        "date": "2024-03-05T09:30:00+01:00",
        "owner": "ops",
    }
    assert (read_given["title"], read_given["tags"]) == ("Mine", ["mine"])
    assert read_given["metadata"]["owner"] == "me"
    assert "owner: ops" not in " ".join(chunk["text"] for chunk in read_bare["chunks"])


@pytest.mark.parametrize(
    ("front_matter", "field", "detail"),
    [
        ("title: " + "x" * 1025, "title", "the title is 1025 characters; at most 1024"),
        ("tags: [" + ", ".join(f"t{n}" for n in range(65)) + "]", "tags", "has 65 tags; at most 64"),
        ("tags: [" + "y" * 129 + "]", "tags", "a tag is 129 characters; at most 128"),
    ],
)
async def test_front_matter_is_held_to_the_bounds_of_the_fields_it_fills(
    client, unique_name, front_matter: str, field: str, detail: str
) -> None:
    response = await post(client, unique_name, {"id": "fm", "text": f"---\n{front_matter}\n---\nBody text."})

    problem = assert_problem(response, 400)
    assert problem["field"] == field
    assert detail in problem["detail"]


async def test_a_date_where_a_date_time_belongs_says_what_a_date_time_looks_like(client, unique_name) -> None:
    written = await post(client, unique_name, doc("dated", event_time="2024-02-03"))
    listed = await client.get(f"/v1/projects/{unique_name}/documents", params={"event_time_from": "2024-02-03"})
    searched = await client.post(
        "/v1/search", json={"query": "x", "project": unique_name, "filters": {"date_from": "2024-02-03"}}
    )

    for response, field in ((written, "event_time"), (listed, "event_time_from"), (searched, "filters.date_from")):
        body = assert_problem(response, 400)
        assert body["field"] == field
        assert "an RFC 3339 date-time such as 2024-05-08T12:00:00Z" in body["detail"]
        assert "(a date alone is not one)" in body["detail"]


async def test_document_over_the_size_limit_is_a_413_and_the_batch_is_not_written(client, unique_name) -> None:
    big = doc("big", "word " * (MAX_DOCUMENT_BYTES // 5 + 1))
    good = doc("good-one", "A perfectly fine document that must not be written alone.")

    response = await post(client, unique_name, {"documents": [good, big]})

    assert str(MAX_DOCUMENT_BYTES) in assert_problem(response, 413)["detail"]
    assert (await client.get(f"/v1/projects/{unique_name}/documents/good-one")).status_code == 404


async def test_metadata_counts_toward_the_document_size_limit(client, unique_name) -> None:
    # Stored and returned with every read: 20 MB of metadata on a five-letter text passed the limit.
    padded = doc("padded", "Short.", metadata={"k": "v" * MAX_DOCUMENT_BYTES})

    response = await post(client, unique_name, padded)

    problem = assert_problem(response, 413)
    assert problem["field"] == "metadata"
    assert "text and metadata" in problem["detail"]
    assert (await client.get(f"/v1/projects/{unique_name}/documents/padded")).status_code == 404


async def test_duplicate_ids_in_a_batch_are_rejected(client, unique_name) -> None:
    response = await post(client, unique_name, {"documents": [doc("same"), doc("same", "Other text, same id here.")]})

    assert "same" in assert_problem(response, 400)["detail"]
    assert (await client.get(f"/v1/projects/{unique_name}/documents/same")).status_code == 404


async def test_too_many_documents_in_one_request_are_rejected(client, unique_name) -> None:
    documents = [doc(f"d{number}", f"Document number {number} of a batch that is too large.") for number in range(6)]

    response = await post(client, unique_name, {"documents": documents})

    assert str(MAX_BATCH_DOCUMENTS) in assert_problem(response)["detail"]
    assert (await client.get(f"/v1/projects/{unique_name}/documents/d0")).status_code == 404


async def test_a_batch_over_the_limit_is_refused_by_its_count_before_its_documents_are_read(
    client, unique_name
) -> None:
    # Every document is invalid: had they been decoded first (3,000,000 of them held 650 MB), one would be blamed.
    response = await post(client, unique_name, {"documents": [{"id": "a"}] * (MAX_BATCH_DOCUMENTS + 1)})

    problem = assert_problem(response)
    assert problem["field"] == "documents"
    assert (
        problem["detail"] == f"more than {MAX_BATCH_DOCUMENTS} documents in one request; at most {MAX_BATCH_DOCUMENTS}"
    )


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"id": "a", "text": "x", "tags": [1] * 65}, "tags"),
        ({"documents": [{"id": "a", "text": "x"}, {"id": "b", "text": "y", "tags": [1] * 65}]}, "documents[1].tags"),
    ],
)
async def test_a_documents_tags_over_the_bound_are_refused_by_their_count_before_they_are_read(
    client, unique_name, body: dict[str, Any], field: str
) -> None:
    response = await post(client, unique_name, body)

    problem = assert_problem(response)
    assert (problem["field"], problem["detail"]) == (field, f"{field}: must hold at most 64 items")


async def test_a_duplicated_documents_key_does_not_hide_a_long_batch(client, unique_name) -> None:
    # The last occurrence of a key wins when a body is read into a map: the count read only that one.
    long_list = json.dumps(
        [doc(f"d{n}", "Text of a document in a long batch.") for n in range(MAX_BATCH_DOCUMENTS + 1)]
    )
    body = f'{{"documents": {long_list}, "documents": [{json.dumps(doc("a", "One short document."))}]}}'

    response = await client.post(
        f"/v1/projects/{unique_name}/documents", content=body, headers={"content-type": "application/json"}
    )

    assert assert_problem(response)["field"] == "documents"
    assert (await client.get(f"/v1/projects/{unique_name}/documents/a")).status_code == 404


@pytest.mark.parametrize(
    "body",
    [
        pytest.param([{"id": "x", "text": "a list, not an object"}], id="top-level-list"),
        pytest.param({"documents": []}, id="empty-batch"),
        pytest.param({"documents": "x"}, id="documents-not-a-list"),
    ],
)
async def test_wrong_body_shapes_are_400_problems(client, unique_name, body) -> None:
    assert_problem(await post(client, unique_name, body), 400)


# `%2E%2E` is `..` to the service: URLs resolve it, so such a project could be written and never read back.
@pytest.mark.parametrize("project", ["bad%20project%21", "p" * 65, "semi;colon", "%2E%2E", "%2E"])
async def test_invalid_project_ids_are_rejected_everywhere(client, project) -> None:
    posted = await post(client, project, doc("x"))
    fetched = await client.get(f"/v1/projects/{project}/documents/x")
    deleted = await client.delete(f"/v1/projects/{project}/documents/x")

    for response in (posted, fetched, deleted):
        assert "project" in assert_problem(response, 400)["detail"]


async def test_a_search_of_a_dot_project_is_refused_naming_the_project(client) -> None:
    response = await client.post("/v1/search", json={"query": "anything", "project": ".."})

    assert assert_problem(response, 400)["field"] == "project"


async def test_a_64_character_project_id_is_accepted(client) -> None:
    project = "p" * 63 + "z"

    response = await post(client, project, doc("x", "A document in a project whose id is exactly 64 characters."))

    assert response.status_code == 201, response.text
    assert (await client.delete(f"/v1/projects/{project}/documents/x")).status_code == 204


async def test_text_and_markdown_together_are_a_400_writing_nothing(client) -> None:
    response = await post(client, "both-bodies", doc("tm", "alpha text", markdown="# Beta\n\nbeta markdown body"))

    problem = assert_problem(response, 400)
    assert problem["field"] == "markdown"
    assert "text or markdown, not both" in problem["detail"]
    assert (await client.get("/v1/projects/both-bodies/documents/tm")).status_code == 404


async def test_a_write_reports_the_version_and_a_stale_if_match_is_refused(client) -> None:
    project = "versions"
    created = await post(client, project, doc("v", "First text of the versioned note."))
    version = created.json()["documents"][0]["version"]

    stale = await client.post(
        f"/v1/projects/{project}/documents", json=doc("v", "Lost update."), headers={"If-Match": f'"{version + 1}"'}
    )
    fresh = await client.post(
        f"/v1/projects/{project}/documents", json=doc("v", "Second text."), headers={"If-Match": f'"{version}"'}
    )
    read = await client.get(f"/v1/projects/{project}/documents/v")

    problem = assert_problem(stale, 409)
    assert problem["current_version"] == version
    assert problem["document_id"] == "v"
    assert fresh.status_code == 200  # an update creates nothing
    new_version = fresh.json()["documents"][0]["version"]
    assert new_version > version
    assert read.json()["version"] == new_version
    assert [chunk["text"] for chunk in read.json()["chunks"]] == ["Second text."]


async def test_if_none_match_star_creates_only_and_conditions_that_disagree_are_refused(client) -> None:
    project = "versions-create-only"
    url = f"/v1/projects/{project}/documents"
    created = await client.post(url, json=doc("n", "A new note."), headers={"If-None-Match": "*"})
    version = created.json()["documents"][0]["version"]
    again = await client.post(url, json=doc("n", "Overwritten?"), headers={"If-None-Match": "*"})
    not_star = await client.post(url, json=doc("n", "Overwritten?"), headers={"If-None-Match": f'"{version}"'})
    disagree = await client.post(
        url, json=doc("n", "Overwritten?", expected_version=version), headers={"If-Match": f'"{version + 1}"'}
    )
    both_headers = await client.post(
        url, json=doc("n", "Overwritten?"), headers={"If-Match": str(version), "If-None-Match": "*"}
    )
    batch = await client.post(
        url, json={"documents": [doc("m", "One."), doc("o", "Two.")]}, headers={"If-None-Match": "*"}
    )
    agree = await client.post(
        url, json=doc("n", "Second text.", expected_version=version), headers={"If-Match": f'"{version}"'}
    )
    read = await client.get(f"{url}/n")

    assert created.status_code == 201, created.text
    assert assert_problem(again, 409)["current_version"] == version
    assert assert_problem(not_star, 400)["field"] == "If-None-Match"
    assert assert_problem(disagree, 400)["field"] == "If-Match"
    assert assert_problem(both_headers, 400)["field"] in {"If-Match", "If-None-Match"}
    assert assert_problem(batch, 400)["field"] == "If-None-Match"
    assert agree.status_code == 200, agree.text
    assert [chunk["text"] for chunk in read.json()["chunks"]] == ["Second text."]


async def test_a_read_carries_the_version_as_its_etag_and_answers_304_for_a_version_held(client) -> None:
    project = "versions-etag"
    url = f"/v1/projects/{project}/documents"
    await post(client, project, doc("e", "First text."))
    await wait_indexed(client, project, "e")  # until then its tag is `"1-pending"` (test_http_semantics)

    read = await client.get(f"{url}/e")
    etag = read.headers["etag"]
    held = await client.get(f"{url}/e", headers={"If-None-Match": f'"0", W/{etag}'})
    anything = await client.get(f"{url}/e", headers={"If-None-Match": "*"})
    updated = await client.post(url, json=doc("e", "Second text."), headers={"If-Match": etag})
    stale = await client.get(f"{url}/e", headers={"If-None-Match": etag})

    assert etag == f'"{read.json()["version"]}"'
    assert (held.status_code, held.headers["etag"], held.content) == (304, etag, b"")
    assert anything.status_code == 304
    assert updated.status_code == 200, updated.text  # the ETag is what If-Match takes back
    assert stale.status_code == 200
    version = updated.json()["documents"][0]["version"]
    assert stale.headers["etag"] in {f'"{version}"', f'"{version}-pending"'} - {etag}  # pending while not indexed
    assert [chunk["text"] for chunk in stale.json()["chunks"]] == ["Second text."]


async def test_if_match_star_writes_and_deletes_only_a_document_that_exists(client) -> None:
    project = "versions-star"
    url = f"/v1/projects/{project}/documents"

    create = await client.post(url, json=doc("s", "First text."), headers={"If-Match": "*"})
    created = await post(client, project, doc("s", "First text."))
    update = await client.post(url, json=doc("s", "Second text."), headers={"If-Match": "*"})
    delete_missing = await client.delete(f"{url}/missing", headers={"If-Match": "*"})
    delete = await client.delete(f"{url}/s", headers={"If-Match": " * "})

    assert assert_problem(create, 409)["document_id"] == "s"  # nothing was there: update-only
    assert created.status_code == 201
    assert update.status_code == 200, update.text
    assert update.json()["documents"][0]["status"] == "updated"
    assert assert_problem(delete_missing, 409)["document_id"] == "missing"
    assert delete.status_code == 204


async def test_expected_version_in_a_batch_and_if_match_on_delete(client) -> None:
    project = "versions-batch"
    created = await post(client, project, {"documents": [doc("a", "Alpha note."), doc("b", "Beta note.")]})
    versions = {item["id"]: item["version"] for item in created.json()["documents"]}

    refused = await post(
        client,
        project,
        {"documents": [doc("a", "Alpha 2.", expected_version=versions["a"]), doc("b", "Beta 2.", expected_version=0)]},
    )
    unchanged = await client.get(f"/v1/projects/{project}/documents/a")
    stale = str(versions["a"] + 1)
    stale_delete = await client.delete(f"/v1/projects/{project}/documents/a", headers={"If-Match": stale})
    bad_header = await client.delete(f"/v1/projects/{project}/documents/a", headers={"If-Match": "abc"})
    delete = await client.delete(f"/v1/projects/{project}/documents/a", headers={"If-Match": str(versions["a"])})

    assert assert_problem(refused, 409)["document_id"] == "b"  # b exists: expected_version 0 means create-only
    assert [chunk["text"] for chunk in unchanged.json()["chunks"]] == ["Alpha note."]  # nothing of the batch
    assert unchanged.json()["version"] == versions["a"]
    assert assert_problem(stale_delete, 409)["current_version"] == versions["a"]
    assert assert_problem(bad_header, 400)["field"] == "If-Match"
    assert delete.status_code == 204


async def test_metadata_floats_read_back_as_floats_however_large(client, unique_name) -> None:
    # jsonb keeps a number's digits, not its spelling: 1e16 read back as 10000000000000000, an integer to
    # every JSON decoder (and 1.5e300 as 301 digits), while 1e15 came back as 1000000000000000.0.
    body = (
        b'{"id": "numbers", "text": "Numbers.", "metadata": {"big": 1e16, "huge": 1.5e300, "negative": -2.5e22,'
        b' "nested": {"list": [1e20, 7]}, "small": 1e15, "fraction": 0.1, "integer": 10000000000000000,'
        b' "long_integer": 123456789012345678901234567890}}'
    )

    written = await client.post(
        f"/v1/projects/{unique_name}/documents", content=body, headers={"content-type": "application/json"}
    )

    assert written.status_code == 201, written.text
    metadata = json.loads((await client.get(f"/v1/projects/{unique_name}/documents/numbers")).content)["metadata"]
    floats = {key: metadata[key] for key in ("big", "huge", "negative", "small", "fraction")}
    assert floats == {"big": 1e16, "huge": 1.5e300, "negative": -2.5e22, "small": 1e15, "fraction": 0.1}
    assert all(type(value) is float for value in [*floats.values(), metadata["nested"]["list"][0]])
    assert metadata["nested"]["list"] == [1e20, 7]
    assert type(metadata["nested"]["list"][1]) is int
    assert (metadata["integer"], metadata["long_integer"]) == (10**16, 123456789012345678901234567890)
    assert type(metadata["integer"]) is int


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b'{"id": "x", "text": "fine", "metadata": {"k": 1e400}}', id="one"),
        pytest.param(
            b'{"documents": [{"id": "x", "text": "fine", "metadata": {"k": {"j": [1, -1E309]}}}]}', id="batch"
        ),
    ],
)
async def test_a_metadata_number_past_a_float_is_a_400_naming_metadata(client, unique_name, body) -> None:
    # msgspec said "metadata[...]: Number out of range", naming a field no client can address.
    response = await client.post(
        f"/v1/projects/{unique_name}/documents", content=body, headers={"content-type": "application/json"}
    )

    problem = assert_problem(response, 400)
    assert problem["field"] in {"metadata", "documents[0].metadata"}
    assert "64-bit float" in problem["detail"]
    assert "[...]" not in problem["detail"]


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        pytest.param({"id": "bad", "text": "fine", "tags": ["ops", " "]}, "tags", id="blank-tag"),
        pytest.param({"id": "bad", "text": " \n "}, "text", id="blank-text"),
        pytest.param({"id": "bad", "title": "no text"}, "text", id="no-text"),
        pytest.param({"id": "bad", "text": "fine", "title": "nul \x00"}, "title", id="nul-title"),
        pytest.param({"id": "bad", "text": "fine", "metadata": {"k": "\x00"}}, "metadata", id="nul-metadata"),
        pytest.param({"id": "a/../b", "text": "fine"}, "id", id="unaddressable-id"),
        pytest.param({"id": "bad", "text": "x" * (MAX_DOCUMENT_BYTES + 1)}, "text", id="too-large"),
        pytest.param(
            {"id": "bad", "text": "fine", "metadata": {"k": "v" * MAX_DOCUMENT_BYTES}},
            "metadata",
            id="metadata-too-large",
        ),
        pytest.param({"id": "bad", "text": "---\ntitle: Only front matter\n---\n"}, "text", id="front-matter-only"),
        pytest.param({"id": "bad", "text": "fine", "markdown": "also"}, "markdown", id="text-and-markdown"),
        pytest.param(
            {"id": "bad", "text": "fine", "event_time": "0001-01-01T00:00:00Z"}, "event_time", id="event-time-infinity"
        ),
    ],
)
async def test_a_refused_batch_names_the_item_and_the_field_as_body_paths(client, unique_name, bad, field) -> None:
    # The field was "tags" or "document_id" whichever item was wrong; msgspec's own errors said "documents[1].tags".
    batch = {"documents": [doc("first", "First."), bad, doc("third", "Third.")]}

    batch_problem = assert_problem(await post(client, unique_name, batch))
    single_problem = assert_problem(await post(client, unique_name, bad))

    assert (batch_problem["field"], single_problem["field"]) == (f"documents[1].{field}", field)
    assert (await client.get(f"/v1/projects/{unique_name}/documents/first")).status_code == 404


async def test_a_document_id_twice_in_a_batch_names_the_second(client, unique_name) -> None:
    batch = {"documents": [doc("one", "One."), doc("two", "Two."), doc("one", "One again.")]}

    problem = assert_problem(await post(client, unique_name, batch), 400)

    assert problem["field"] == "documents[2].id"
    assert "'one'" in problem["detail"]


async def test_a_body_over_the_request_limit_is_a_413_saying_the_limit(client, unique_name) -> None:
    # It said "Request Entity Too Large" and nothing of the limit (16 MiB, whatever MAX_DOCUMENT_BYTES is). The
    # ingest limit was the app's 64 MiB, whose 46,000 chunks of prose took a replica past the chart's 2 GiB.
    body = b'{"documents": [' + b" " * (16 * 1024 * 1024) + b"]}"

    response = await client.post(
        f"/v1/projects/{unique_name}/documents", content=body, headers={"content-type": "application/json"}
    )

    problem = assert_problem(response, 413)
    assert str(16 * 1024 * 1024) in problem["detail"]
    assert "fewer documents" in problem["detail"]


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        (
            b'{"id": "x", "text": "fine", "tags": ["\\udc00"]}',
            "malformed JSON: a \\uDC00-\\uDFFF escape not after a \\uD800-\\uDBFF one (a lone surrogate is no character)",
        ),
        (
            b'{"documents": [{"id": "x", "text": "fine", "metadata": {"k": "\\ud800\\u0041"}}]}',
            "malformed JSON: a \\uD800-\\uDBFF escape not followed by a \\uDC00-\\uDFFF one (a lone surrogate is no character)",
        ),
        (b'{"id": "x", "text": "fine", "metadata": {"k": NaN}}', "malformed JSON: invalid character (byte 46)"),
    ],
)  # fmt: skip
async def test_a_malformed_body_is_worded_once_and_a_lone_surrogate_named(client, unique_name, body, detail) -> None:
    # A lone low surrogate was "JSON is malformed: invalid utf-16 surrogate pair", after "malformed JSON: " too.
    response = await client.post(
        f"/v1/projects/{unique_name}/documents", content=body, headers={"content-type": "application/json"}
    )

    problem = assert_problem(response, 400)
    assert (problem["field"], problem["detail"]) == ("body", detail)
