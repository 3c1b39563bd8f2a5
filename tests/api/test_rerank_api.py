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
NOTES_PROJECT = "rerank-api-notes"
_NOTES = [
    ("backup", "Nightly backups of the orders database run at 02:00 and are kept for 30 days."),
    (
        "restore",
        "To restore a backup, stop the service, run pg_restore on the dump and restart. We did this on March 3, 2024.",
    ),
    ("ports", "If port 8080 is taken, find the process with lsof -i :8080 and stop it."),
    ("dns", "DNS failures in the cluster usually come from CoreDNS running out of memory."),
    ("release", "The 2.3 release shipped last week with the new search console and faster ingest."),
    ("latency", "Search latency rose in April 2024 after the index grew past a million chunks."),
    ("kafka", "Kafka consumer lag alerts fire when a partition falls ten minutes behind."),
]
_TURNS = [
    ("Alice", "Did the backup finish last night?"),
    ("Bob", "Yes, the backup finished at 02:40 without errors."),
    ("Alice", "Great. When did we last test a restore?"),
    ("Bob", "We tested a restore on March 3, 2024, it took twenty minutes."),
    ("Alice", "The pager woke me up twice for Kafka lag."),
    ("Bob", "Kafka lag again? We should raise the partition count."),
    ("Alice", "I adopted a cat named Pixel yesterday."),
    ("Bob", "Pixel is a great name for a cat."),
]
NOTES = [{"id": f"note-{name}", "title": name.title(), "text": text} for name, text in _NOTES] + [
    {"id": f"conv-1:D1:{n}", "title": speaker, "text": text, "event_time": "2024-03-10T18:00:00Z"}
    for n, (speaker, text) in enumerate(_TURNS, start=1)
]


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
            response = await test_client.post(f"/v1/projects/{NOTES_PROJECT}/documents", json={"documents": NOTES})
            assert response.status_code == 201, response.text
            for document in NOTES:
                await wait_indexed(test_client, NOTES_PROJECT, document["id"])
            yield test_client


async def search(client: AsyncTestClient[Litestar], **body: Any) -> dict[str, Any]:
    response = await client.post("/v1/search", json={"project": PROJECT} | body)
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


@pytest.mark.parametrize("query", ["kafka lag", "when did we test a restore", "Bob backups"])
async def test_min_score_drops_reranked_hits_without_reordering_the_rest(client, query) -> None:
    # The learned ranker normalises its features over the candidates it is given: shown only those min_score
    # kept, it scored and ordered them otherwise than the same hits without min_score.
    unfloored = await search(client, project=NOTES_PROJECT, query=query, strategy="hybrid")
    thresholds = sorted({hit["final_score"] for hit in unfloored["results"]})[1:]

    answers = [
        await search(client, project=NOTES_PROJECT, query=query, strategy="hybrid", min_score=threshold)
        for threshold in thresholds
    ]

    assert thresholds
    for threshold, answer in zip(thresholds, answers, strict=True):
        kept = [hit for hit in unfloored["results"] if hit["final_score"] >= threshold]
        assert [(hit["id"], hit["rerank_score"]) for hit in answer["results"]] == [
            (hit["id"], hit["rerank_score"]) for hit in kept
        ], threshold
