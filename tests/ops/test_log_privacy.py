"""What a memory holds stays out of the logs: no query text and no document text at INFO and above."""

from __future__ import annotations

import logging

from tests.ops.conftest import document, wait_indexed

SECRET_WORD = "quillfeatherSECRET"


async def test_query_and_document_text_are_never_logged_at_info(ops_app, unique_name, caplog) -> None:
    caplog.set_level(logging.INFO)
    memory = document("m1", f"# Diary\n\nThe vault code word is {SECRET_WORD} and nobody else knows it.")
    async with ops_app.client() as client:
        await client.post(f"/v1/projects/{unique_name}/documents", json={"documents": [memory]})
        await wait_indexed(client, unique_name, "m1")
        found = await client.get("/memory/query", params={"query": f"code word {SECRET_WORD}", "project": unique_name})
        refused = await client.get("/memory/query", params={"query": SECRET_WORD, "project": unique_name, "limit": 0})
        await ops_app.engines.close_lexical()  # a degraded search, and the outbox failing on the next write
        degraded = await client.get("/memory/query", params={"query": f"{SECRET_WORD} again", "project": unique_name})
        await client.post(
            f"/v1/projects/{unique_name}/documents", json={"documents": [document("m2", f"Also {SECRET_WORD}.")]}
        )

    assert found.json()["results"]
    assert refused.status_code == 400
    assert degraded.json()["degraded"] is True
    # httpx is the test's own client here (`poimen serve` keeps that library at WARNING).
    service_records = [record for record in caplog.records if record.name != "httpx"]
    assert service_records, "the service logged nothing: the test would prove nothing"
    leaked = [
        record.getMessage()
        for record in service_records
        if SECRET_WORD.lower() in (record.getMessage() + repr(record.__dict__)).lower()
    ]
    assert leaked == []
