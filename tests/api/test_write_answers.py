"""What a document write answers: 201 only when it created a document, and the ETag of the version it left.

RFC 9110 15.3.2: 201 says the request created a resource. A write that replaced a document, or found it
unchanged, created nothing: 200, with the same body of outcomes. A one-document write names the document
(`Location`) and its entity tag (`ETag`, 8.8.3), so a caller can send `If-Match` next without a `GET`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from tests.api.conftest import api_settings, app_client, build_engines, wait_indexed

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from litestar import Litestar
    from litestar.testing import AsyncTestClient

    from app.engines.embedder import ServingEmbedder


@pytest.fixture(scope="module")
async def client(
    api_postgres_url: str, embedder: ServingEmbedder, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[AsyncTestClient[Litestar]]:
    data_dir = tmp_path_factory.mktemp("write_answers")
    async with (
        build_engines(database_url=api_postgres_url, lexical_path=data_dir / "lexical", embedder=embedder) as built,
        app_client(built.app(api_settings(data_dir))) as test_client,
    ):
        yield test_client


def note(document_id: str, text: str = "# Ports\n\nIf port 8080 is taken, run lsof.") -> dict[str, Any]:
    return {"id": document_id, "title": "Ports", "text": text}


async def post(client: Any, project: str, body: Any, **headers: str) -> Any:
    return await client.post(f"/v1/projects/{project}/documents", json=body, headers=headers)


async def test_a_write_that_creates_nothing_answers_200_with_its_outcome(client, unique_name) -> None:
    created = await post(client, unique_name, note("a"))
    unchanged = await post(client, unique_name, note("a"))
    updated = await post(client, unique_name, note("a", "# Ports\n\nIf port 9090 is taken, run ss."))

    answers = [(r.status_code, r.json()["documents"][0]["status"]) for r in (created, unchanged, updated)]
    assert answers == [(201, "created"), (200, "unchanged"), (200, "updated")]


async def test_a_batch_answers_201_when_it_created_a_document_and_200_when_it_created_none(client, unique_name) -> None:
    first = await post(client, unique_name, {"documents": [note("a"), note("b")]})
    same = await post(client, unique_name, {"documents": [note("a"), note("b")]})
    one_new = await post(client, unique_name, {"documents": [note("a"), note("c")]})

    assert [first.status_code, same.status_code, one_new.status_code] == [201, 200, 201]
    assert [d["status"] for d in one_new.json()["documents"]] == ["unchanged", "created"]


async def test_a_one_document_write_answers_the_etag_a_read_then_gives(client, unique_name) -> None:
    url = f"/v1/projects/{unique_name}/documents"

    created = await post(client, unique_name, note("a"))
    version = created.json()["documents"][0]["version"]
    read = await client.get(f"{url}/a")

    # Just written, the lexical index has not taken it yet: the pending tag, which a read may already have left.
    assert created.headers["etag"] == f'"{version}-pending"'
    assert read.headers["etag"] in {created.headers["etag"], f'"{version}"'}


async def test_an_unchanged_write_answers_the_etag_of_the_stored_version_as_a_read_does(client, unique_name) -> None:
    url = f"/v1/projects/{unique_name}/documents"
    await post(client, unique_name, note("a"))
    await wait_indexed(client, unique_name, "a")

    unchanged = await post(client, unique_name, note("a"))
    read = await client.get(f"{url}/a")

    assert unchanged.headers["etag"] == read.headers["etag"] == f'"{read.json()["version"]}"'


async def test_the_etag_of_a_write_is_what_the_next_conditional_write_sends(client, unique_name) -> None:
    first = await post(client, unique_name, note("a"))
    second = await post(client, unique_name, note("a", "Second text."), **{"If-Match": first.headers["etag"]})
    stale = await post(client, unique_name, note("a", "Third text."), **{"If-Match": first.headers["etag"]})

    assert second.status_code == 200, second.text
    assert second.headers["etag"] == f'"{second.json()["documents"][0]["version"]}-pending"'
    assert stale.status_code == 409, stale.text


async def test_a_batch_answers_no_etag(client, unique_name) -> None:
    batch = await post(client, unique_name, {"documents": [note("a")]})

    assert batch.status_code == 201, batch.text
    assert "etag" not in batch.headers
