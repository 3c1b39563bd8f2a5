"""HTTP semantics a demanding client or proxy relies on: request targets, conditional reads, codings, methods."""

from __future__ import annotations

import pytest

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
