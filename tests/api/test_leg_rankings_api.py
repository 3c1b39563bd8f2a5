"""`explain` returns each leg's own ranked top-k next to the fused hits, on fresh, cached and later pages."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from jsonschema import Draft202012Validator

from tests.api.conftest import wait_indexed

if TYPE_CHECKING:
    from litestar import Litestar
    from litestar.testing import AsyncTestClient

TOPICS = ["lake", "mountain", "forest", "river", "desert", "ocean", "garden"]


@pytest.fixture(scope="module")
async def project(api_client: AsyncTestClient[Litestar]) -> str:
    name = "leg-rankings"
    documents = [
        {"id": f"d{n}", "title": f"Painting {topic}", "text": f"Melanie painted a {topic} at sunrise, day {n}."}
        for n, topic in enumerate(TOPICS)
    ]
    response = await api_client.post(f"/v1/projects/{name}/documents", json={"documents": documents})
    assert response.status_code == 201, response.text
    for document in documents:
        await wait_indexed(api_client, name, document["id"])
    return name


@pytest.fixture(scope="module")
async def validator(api_client: AsyncTestClient[Litestar]) -> Draft202012Validator:
    document = (await api_client.get("/schema/openapi.json")).json()
    return Draft202012Validator(
        {**document["components"]["schemas"]["SearchResponse"], "components": document["components"]}
    )


async def search(client: AsyncTestClient[Litestar], body: dict[str, Any]) -> dict[str, Any]:
    response = await client.post("/v1/search", json=body)
    assert response.status_code == 200, response.text
    return response.json()


async def test_explain_returns_both_legs_rankings_matching_the_fused_ranks(api_client, project, validator) -> None:
    body = {"query": "lake sunrise", "project": project, "strategy": "hybrid", "limit": 2, "explain": True}

    answer = await search(api_client, body)

    validator.validate(answer)
    rankings = answer["leg_rankings"]
    for leg in ("semantic", "lexical"):
        assert [hit["rank"] for hit in rankings[leg]] == list(range(1, len(rankings[leg]) + 1))
        scores = [hit["score"] for hit in rankings[leg]]
        assert scores == sorted(scores, reverse=True)
    assert len(rankings["semantic"]) == len(TOPICS)  # the whole top-k, not the 2 fused hits
    assert rankings["lexical"][0]["document_id"] == "d0"
    semantic_rank = {hit["id"]: hit["rank"] for hit in rankings["semantic"]}
    lexical_rank = {hit["id"]: hit["rank"] for hit in rankings["lexical"]}
    for hit in answer["results"]:
        assert hit["score_breakdown"]["semantic_rank"] == semantic_rank.get(hit["id"])
        assert hit["score_breakdown"]["lexical_rank"] == lexical_rank.get(hit["id"])


async def test_without_explain_there_are_no_leg_rankings(api_client, project) -> None:
    answer = await search(api_client, {"query": "lake sunrise", "project": project})

    assert answer["leg_rankings"] is None


async def test_a_cached_answer_carries_the_same_leg_rankings(api_client, project) -> None:
    body = {"query": "mountain painting", "project": project, "strategy": "hybrid", "explain": True}

    first = await search(api_client, body)
    second = await search(api_client, body)

    assert (first["cached"], second["cached"]) == (False, True)
    assert second["leg_rankings"] == first["leg_rankings"]
    # This request's own times: a hit ran no embedding or search, whatever the first one cost.
    assert first["metrics"]["embed_time_ms"] > 0
    assert [second["metrics"][f"{stage}_time_ms"] for stage in ("embed", "semantic", "lexical", "fusion")] == [0] * 4
    assert second["metrics"]["semantic_results_count"] == first["metrics"]["semantic_results_count"]


async def test_every_page_carries_the_legs_whole_rankings(api_client, project) -> None:
    body = {"query": "forest river", "project": project, "strategy": "hybrid", "limit": 2, "explain": True}

    first = await search(api_client, body | {"offset": 0})
    second = await search(api_client, body | {"cursor": first["next_cursor"]})

    assert second["offset"] == 2
    assert second["leg_rankings"] == first["leg_rankings"]


async def test_a_single_leg_strategy_has_no_ranking_for_the_other_leg(api_client, project) -> None:
    answer = await search(api_client, {"query": "ocean", "project": project, "strategy": "lexical", "explain": True})

    assert answer["leg_rankings"]["semantic"] is None
    assert [hit["document_id"] for hit in answer["leg_rankings"]["lexical"]] == ["d5"]


async def test_a_cached_answer_explains_this_requests_query_not_the_one_that_filled_the_cache(
    api_client, project
) -> None:
    # The key holds the plan; the two spellings share an answer, but "names" come from the capitals.
    capitalised = {"query": "Falcon Raptors painting", "project": project, "strategy": "hybrid", "explain": True}
    lowercase = {**capitalised, "query": "falcon raptors painting"}

    first = await search(api_client, capitalised)
    second = await search(api_client, lowercase)

    assert (first["cached"], second["cached"]) == (False, True)
    assert first["query_analysis"]["entities"]["names"] == ["falcon", "raptors"]
    assert second["query_analysis"]["entities"]["names"] == []
