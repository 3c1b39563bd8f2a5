"""A document's `event_time` is kept to the microsecond: digits past it are dropped, never rounded.

Rounding moved `2024-12-31T23:59:59.9999999Z` into 2025 (and a date filter for 2024 lost the document);
front matter's `date` was already truncated (`datetime.fromisoformat`). One app on the real engines.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.api.conftest import api_settings, app_client, build_engines

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from litestar import Litestar
    from litestar.testing import AsyncTestClient

    from app.engines.embedder import ServingEmbedder


@pytest.fixture(scope="module")
async def client(
    api_postgres_url: str, embedder: ServingEmbedder, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[AsyncTestClient[Litestar]]:
    data_dir = tmp_path_factory.mktemp("event_time_precision")
    async with (
        build_engines(database_url=api_postgres_url, lexical_path=data_dir / "lexical", embedder=embedder) as built,
        app_client(built.app(api_settings(data_dir))) as test_client,
    ):
        yield test_client


@pytest.mark.parametrize(
    ("sent", "stored"),
    [
        pytest.param("2024-12-31T23:59:59.9999999Z", "2024-12-31T23:59:59.999999Z", id="stays-in-its-year"),
        pytest.param("2024-01-01T00:00:00.123456789+02:00", "2023-12-31T22:00:00.123456Z", id="nanoseconds-offset"),
        pytest.param("2024-01-01T00:00:00.1234565Z", "2024-01-01T00:00:00.123456Z", id="no-half-up"),
        pytest.param("2024-01-01T00:00:00.5Z", "2024-01-01T00:00:00.500000Z", id="fewer-digits"),
    ],
)
async def test_event_time_digits_past_the_microsecond_are_dropped_not_rounded(
    client: AsyncTestClient[Litestar], unique_name: str, sent: str, stored: str
) -> None:
    documents = f"/v1/projects/{unique_name}/documents"

    written = await client.post(documents, json={"id": "a", "text": "Alpha.", "event_time": sent})
    read = await client.get(f"{documents}/a")

    assert written.status_code == 201, written.text
    assert read.json()["event_time"] == stored


async def test_a_time_with_escaped_characters_is_truncated_alike(
    client: AsyncTestClient[Litestar], unique_name: str
) -> None:
    documents = f"/v1/projects/{unique_name}/documents"
    body = '{"id": "a", "text": "Alpha.", "event_time": "2024-12-31T23:59:59\\u002e99999\\u00399Z"}'

    written = await client.post(documents, content=body, headers={"content-type": "application/json"})
    read = await client.get(f"{documents}/a")

    assert written.status_code == 201, written.text
    assert read.json()["event_time"] == "2024-12-31T23:59:59.999999Z"


async def test_each_document_of_a_batch_keeps_its_own_truncated_event_time(
    client: AsyncTestClient[Litestar], unique_name: str
) -> None:
    documents = f"/v1/projects/{unique_name}/documents"
    batch = {
        "documents": [
            {"id": "a", "text": "Alpha.", "event_time": "2024-06-01T00:00:00Z"},
            {"id": "b", "text": "Beta.", "context": "at .1234567 s", "metadata": {"ratio": 0.12345678}},
            {"id": "c", "text": "Gamma.", "event_time": "2024-06-30T23:59:59.999999999Z"},
        ]
    }

    written = await client.post(documents, json=batch)
    read = [(await client.get(f"{documents}/{name}")).json()["event_time"] for name in "abc"]

    assert written.status_code == 201, written.text
    assert read == ["2024-06-01T00:00:00Z", None, "2024-06-30T23:59:59.999999Z"]
