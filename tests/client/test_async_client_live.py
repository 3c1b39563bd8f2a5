"""`AsyncPoimenClient` against the live service (auth off): the same endpoints, awaited."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest
from poimen_client.clients import AsyncPoimenClient
from poimen_client.errors import ConflictError, NotFoundError
from poimen_client.models import Document, SearchQuery

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

pytestmark = pytest.mark.integration


@pytest.fixture
async def client(service_url: str) -> AsyncIterator[AsyncPoimenClient]:
    async with AsyncPoimenClient(service_url) as client:
        yield client


async def test_ingest_then_search_finds_the_document(client: AsyncPoimenClient, unique_name: str) -> None:
    await client.ingest(
        unique_name,
        [
            Document(id="ports", text="# Ports\n\nIf port 8080 is taken, find the process with lsof."),
            Document(id="bread", text="# Bread\n\nSourdough needs a starter fed every day."),
        ],
    )

    answer = await client.search(unique_name, SearchQuery(query="port 8080 is busy", strategy="semantic"))

    assert answer.results[0].document_id == "ports"


async def test_concurrent_searches_share_one_client(client: AsyncPoimenClient, unique_name: str) -> None:
    await client.ingest(unique_name, Document(id="rail", text="# Rail\n\nThe night train leaves Vienna at ten."))

    answers = await asyncio.gather(*(client.memory_query(unique_name, f"train {n}") for n in range(4)))

    assert [answer.query for answer in answers] == [f"train {n}" for n in range(4)]


async def test_errors_are_the_same_typed_errors(client: AsyncPoimenClient, unique_name: str) -> None:
    written = await client.ingest(unique_name, Document(id="a", text="# A\n\nAlpha."))
    version = written.documents[0].version

    with pytest.raises(NotFoundError):
        await client.get_document(unique_name, "missing")
    with pytest.raises(ConflictError) as raised:
        await client.delete_document(unique_name, "a", if_match=version + 1)

    assert raised.value.current_version == version
