"""`RERANKER=learned` through HTTP: hybrid hits carry `rerank_score` in its order, the stage is timed and exported."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from tests.api.conftest import api_settings, app_client, build_engines, wait_indexed

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from litestar import Litestar
    from litestar.testing import AsyncTestClient

PROJECT = "rerank-api"
TOPICS = ["lake", "mountain", "forest", "river", "desert", "ocean", "garden"]


@pytest.fixture(scope="module")
async def client(api_postgres_url, embedder, tmp_path_factory) -> AsyncIterator[AsyncTestClient[Litestar]]:
    data_dir = tmp_path_factory.mktemp("rerank-api")
    async with build_engines(
        database_url=api_postgres_url, lexical_path=data_dir / "lexical", embedder=embedder
    ) as built:
        app = built.app(api_settings(data_dir, reranker="learned", query_cache_ttl_secs=0))
        async with app_client(app) as test_client:
            documents = [
                {"id": f"d{n}", "title": f"Painting {topic}", "text": f"Melanie painted a {topic} at sunrise, day {n}."}
                for n, topic in enumerate(TOPICS)
            ]
            response = await test_client.post(f"/v1/projects/{PROJECT}/documents", json={"documents": documents})
            assert response.status_code == 201, response.text
            for document in documents:
                await wait_indexed(test_client, PROJECT, document["id"])
            yield test_client


async def search(client: AsyncTestClient[Litestar], **body: Any) -> dict[str, Any]:
    response = await client.post("/v1/search", json={"project": PROJECT, **body})
    assert response.status_code == 200, response.text
    return response.json()


async def test_hybrid_hits_are_ordered_by_the_rerank_score(client) -> None:
    answer = await search(client, query="painted lake sunrise", strategy="hybrid")

    scores = [hit["rerank_score"] for hit in answer["results"]]
    assert len(scores) == len(TOPICS)
    assert None not in scores
    assert scores == sorted(scores, reverse=True)
    assert answer["metrics"]["rerank_time_ms"] > 0
    assert not answer["degraded"]


async def test_a_single_leg_search_is_not_reranked(client) -> None:
    answer = await search(client, query="painted lake sunrise", strategy="lexical")

    assert answer["results"]
    assert all(hit["rerank_score"] is None for hit in answer["results"])
    assert answer["metrics"]["rerank_time_ms"] == 0


async def test_the_rerank_stage_is_exported_to_prometheus(client) -> None:
    await search(client, query="painted river", strategy="hybrid")

    text = (await client.get("/metrics")).text

    counts = [
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("poimen_query_stage_duration_seconds_count") and 'stage="rerank"' in line
    ]
    assert sum(counts) > 0
