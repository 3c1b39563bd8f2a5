"""HTTP semantics a demanding client or proxy relies on: request targets, conditional reads, codings, methods."""

from __future__ import annotations

import pytest

from app.engines.pgvector import create_postgres_engine
from app.engines.postgres import PostgresDocumentStore
from app.ingestion.reindex import rebuild_project
from tests.api.conftest import api_settings, app_client, build_engines, wait_indexed

PROJECT = "http-semantics"


@pytest.fixture(scope="module")
async def client(api_client):
    for document_id in ("x\ufffd", "plain"):
        response = await api_client.post(
            f"/v1/projects/{PROJECT}/documents", json={"id": document_id, "text": f"Runbook {document_id}."}
        )
        assert response.status_code == 201
    return api_client


@pytest.mark.parametrize("escapes", ["x%FF", "x%C3", "x%C3%28"])
async def test_a_path_whose_escapes_are_not_utf8_addresses_no_document(client, escapes) -> None:
    # uvicorn decoded each to `x` and U+FFFD: the document stored under that id was read and deleted.
    read = await client.get(f"/v1/projects/{PROJECT}/documents/{escapes}")
    deleted = await client.delete(f"/v1/projects/{PROJECT}/documents/{escapes}")

    assert (read.status_code, deleted.status_code) == (400, 400)
    assert read.json()["field"] == "path"
    assert "not UTF-8" in read.json()["detail"]
    assert (await client.get(f"/v1/projects/{PROJECT}/documents/x%EF%BF%BD")).status_code == 200


async def test_a_query_value_whose_escapes_are_not_utf8_is_a_400_naming_it(client) -> None:
    response = await client.get(f"/memory/query?project={PROJECT}&query=runbook%FF")

    assert response.status_code == 400
    assert response.json()["field"] == "query"


async def test_utf8_escapes_in_path_and_query_still_answer(client) -> None:
    read = await client.get(f"/v1/projects/{PROJECT}/documents/x%EF%BF%BD")
    searched = await client.get(f"/memory/query?project={PROJECT}&query=runbook%C3%A9+plain")

    assert read.status_code == 200
    assert read.json()["id"] == "x\ufffd"
    assert searched.status_code == 200


@pytest.mark.parametrize("coding", ["gzip", "br", "x-unknown", "identity, gzip"])
async def test_a_body_in_a_content_coding_is_a_415_and_nothing_is_written(client, coding) -> None:
    # Sent plain but labelled: it was written as if the label were not there (a gzip one was "malformed JSON").
    body = b'{"id": "coded", "text": "Sent with a content coding."}'
    headers = {"content-type": "application/json", "content-encoding": coding}

    written = await client.post(f"/v1/projects/{PROJECT}/documents", content=body, headers=headers)
    searched = await client.post("/v1/search", content=b'{"project": "p", "query": "q"}', headers=headers)

    assert (written.status_code, searched.status_code) == (415, 415)
    assert written.headers["accept-encoding"] == "identity"
    assert written.headers["content-type"].startswith("application/problem+json")
    assert (await client.get(f"/v1/projects/{PROJECT}/documents/coded")).status_code == 404


async def test_a_body_labelled_another_charset_is_a_415(client) -> None:
    body = '{"id": "latin", "text": "café"}'.encode("utf-16")

    response = await client.post(
        f"/v1/projects/{PROJECT}/documents", content=body, headers={"content-type": "application/json; charset=UTF-16"}
    )

    assert response.status_code == 415
    assert "UTF-8" in response.json()["detail"]


async def test_identity_and_a_utf8_charset_are_read(client) -> None:
    body = '{"id": "identity", "text": "Plain café."}'.encode()
    headers = {"content-type": 'application/json; charset="utf-8"', "content-encoding": "identity"}

    response = await client.post(f"/v1/projects/{PROJECT}/documents", content=body, headers=headers)

    assert response.status_code == 201, response.text


@pytest.mark.parametrize(
    ("path", "body"),
    [
        (f"/v1/projects/{PROJECT}/documents", b'{"tag": "draft"}'),
        (f"/memory/query?project={PROJECT}&query=runbook", b'{"limit": 1}'),
        (f"/v1/projects/{PROJECT}/documents/plain", b'{"version": 1}'),
    ],
)
async def test_a_read_sent_a_body_it_would_ignore_is_a_400(client, path, body) -> None:
    # The body's filter or limit was dropped unread: every document, ten hits.
    response = await client.request("GET", path, content=body, headers={"content-type": "application/json"})

    assert response.status_code == 400
    assert response.json()["field"] == "body"
    assert "takes no request body" in response.json()["detail"]


async def test_a_read_with_an_empty_body_or_an_empty_object_is_answered(client) -> None:
    url = f"/v1/projects/{PROJECT}/documents/plain"

    empty = await client.request("GET", url, content=b"", headers={"content-length": "0"})
    nothing = await client.request("GET", url, content=b"{}", headers={"content-type": "application/json"})

    assert (empty.status_code, nothing.status_code) == (200, 200)


@pytest.mark.parametrize("path", [f"/v1/projects/{PROJECT}/documents/plain", "/healthz", "/v1/projects", "/console"])
async def test_head_answers_as_get_without_the_body(client, path) -> None:
    # Every route but the console's answered HEAD with a 405 (RFC 9110 9.1: a server MUST support HEAD).
    got = await client.get(path)
    headed = await client.head(path)

    assert headed.status_code == got.status_code == 200
    assert headed.content == b""
    assert headed.headers["content-type"] == got.headers["content-type"]
    assert headed.headers.get("etag") == got.headers.get("etag")


@pytest.mark.parametrize(
    ("path", "methods"),
    [
        (f"/v1/projects/{PROJECT}/documents/plain", "DELETE, GET, HEAD, OPTIONS"),
        (f"/v1/projects/{PROJECT}/documents", "DELETE, GET, HEAD, OPTIONS, POST"),
        (f"/v1/projects/{PROJECT}", "DELETE, GET, HEAD, OPTIONS"),
        ("/v1/search", "OPTIONS, POST"),
    ],
)
async def test_options_and_a_405_name_every_method_of_the_path(client, path, methods) -> None:
    # OPTIONS named one handler's methods (`GET, OPTIONS` on a document, which DELETE also takes).
    options = await client.options(path)
    refused = await client.request("PUT", path)

    assert options.status_code == 204
    assert options.headers["allow"] == methods
    assert refused.status_code == 405
    assert refused.headers["allow"] == methods


async def test_options_with_the_query_string_of_its_get_is_answered(client) -> None:
    response = await client.options(f"/memory/query?project={PROJECT}&query=runbook")

    assert response.status_code == 204
    assert response.headers["allow"] == "GET, HEAD, OPTIONS"


async def queue_behind_the_apps_back(database_url: str, project: str) -> None:
    """Queue the project for lexical indexing again from this loop (the app's pool is its client's), waking nothing."""
    pool = create_postgres_engine(database_url, pool_size=1)
    try:
        await rebuild_project(PostgresDocumentStore(pool), project)
    finally:
        await pool.dispose()


async def test_a_caller_holding_the_pending_answer_is_sent_the_indexed_one(
    api_postgres_url, embedder, tmp_path
) -> None:
    # `lexically_indexed` turns true with no new version: under one ETag, the pending answer was told 304.
    # The outbox drains on a write's wake only: queued behind its back (below), a document stays pending.
    settings = api_settings(tmp_path, outbox_poll_interval_s=3600)
    async with (
        build_engines(database_url=api_postgres_url, lexical_path=tmp_path / "lexical", embedder=embedder) as built,
        app_client(built.app(settings)) as client,
    ):
        url = "/v1/projects/etag-pending/documents"
        written = await client.post(url, json={"id": "e", "text": "Pending until the lexical index has it."})
        await wait_indexed(client, "etag-pending", "e")
        await queue_behind_the_apps_back(api_postgres_url, "etag-pending")
        pending = await client.get(f"{url}/e")
        reindexed = await client.post("/v1/projects/etag-pending/reindex")  # queued and woken
        await wait_indexed(client, "etag-pending", "e")

        polled = await client.get(f"{url}/e", headers={"If-None-Match": pending.headers["etag"]})
        held = await client.get(f"{url}/e", headers={"If-None-Match": polled.headers["etag"]})
        replaced = await client.post(
            url, json={"id": "e", "text": "Replaced."}, headers={"If-Match": pending.headers["etag"]}
        )

    version = written.json()["documents"][0]["version"]
    assert (pending.json()["lexically_indexed"], pending.headers["etag"]) == (False, f'"{version}-pending"')
    assert reindexed.status_code == 200
    assert polled.status_code == 200
    assert (polled.json()["lexically_indexed"], polled.headers["etag"]) == (True, f'"{version}"')
    assert held.status_code == 304
    assert replaced.status_code == 200, replaced.text  # If-Match takes the pending tag back as its version


async def test_a_read_with_if_match_naming_another_version_is_a_409_without_the_document(client) -> None:
    # If-Match on a read was accepted and ignored: the document was sent whatever version the caller expected.
    url = f"/v1/projects/{PROJECT}/documents/plain"
    current = await client.get(url)
    version = current.json()["version"]

    stale = await client.get(url, headers={"If-Match": f'"{version + 1}"'})
    stale_head = await client.head(url, headers={"If-Match": f'"{version + 1}"'})

    assert (stale.status_code, stale_head.status_code) == (409, 409)
    assert stale.json()["current_version"] == version
    assert "text" not in stale.json()


@pytest.mark.parametrize("held", ["current", "*", "weak", "bare"])
async def test_a_read_with_if_match_naming_the_stored_version_is_answered(client, held) -> None:
    url = f"/v1/projects/{PROJECT}/documents/plain"
    version = (await client.get(url)).json()["version"]
    if_match = {"current": f'"{version}"', "*": "*", "weak": f'W/"{version}"', "bare": str(version)}[held]

    response = await client.get(url, headers={"If-Match": if_match})

    assert response.status_code == 200
    assert response.json()["id"] == "plain"


async def test_a_read_with_a_malformed_if_match_is_a_400_naming_it(client) -> None:
    response = await client.get(f"/v1/projects/{PROJECT}/documents/plain", headers={"If-Match": "latest"})

    assert response.status_code == 400
    assert response.json()["field"] == "If-Match"


GUARDED = "http-semantics-guarded"


@pytest.mark.parametrize(
    ("method", "path", "header", "value"),
    [
        ("DELETE", f"/v1/projects/{GUARDED}/documents?tag=kept", "If-Match", '"999"'),
        ("DELETE", f"/v1/projects/{GUARDED}", "If-Match", '"999"'),
        ("DELETE", f"/v1/projects/{GUARDED}", "If-Unmodified-Since", "Thu, 01 Jan 1970 00:00:00 GMT"),
        ("DELETE", f"/v1/projects/{GUARDED}/documents/kept", "If-None-Match", "*"),
        ("DELETE", f"/v1/projects/{GUARDED}/documents/kept", "If-Unmodified-Since", "Thu, 01 Jan 1970 00:00:00 GMT"),
        ("POST", f"/v1/projects/{GUARDED}/reindex", "If-Match", '"999"'),
        ("GET", f"/v1/projects/{GUARDED}/documents", "If-Match", '"999"'),
        ("GET", f"/v1/projects/{GUARDED}/documents/kept", "If-Unmodified-Since", "Thu, 01 Jan 1970 00:00:00 GMT"),
    ],
)
async def test_a_precondition_a_route_cannot_evaluate_is_a_400_and_nothing_is_done(
    client, method, path, header, value
) -> None:
    # Ignored, `If-Match: "999"` on a delete by filter or of a project deleted anyway: the caller's guard did nothing.
    written = await client.post(
        f"/v1/projects/{GUARDED}/documents", json={"id": "kept", "text": "Guarded by a precondition.", "tags": ["kept"]}
    )

    response = await client.request(method, path, headers={header: value})

    assert written.status_code in {200, 201}
    assert response.status_code == 400, response.text
    assert response.json()["field"] == header
    assert (await client.get(f"/v1/projects/{GUARDED}/documents/kept")).status_code == 200


async def test_a_read_without_validators_still_takes_if_none_match(client) -> None:
    # A tag list names no listing (it has no ETag): the condition holds and the listing is sent (RFC 9110, 13.1.2).
    response = await client.get(f"/v1/projects/{PROJECT}/documents", headers={"If-None-Match": '"7"'})

    assert response.status_code == 200
