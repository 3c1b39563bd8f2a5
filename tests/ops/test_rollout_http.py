"""Traffic split: HYBRID_ROLLOUT_PERCENT through the app, sticky callers, shadow overlap, share over many callers."""

from __future__ import annotations

import asyncio
import time

import pytest

from app.search.rollout import assign_arm
from tests.ops.conftest import CORPUS, sample, wait_indexed

SYNTHETIC_CALLERS = 10_000


async def ingest_corpus(client, project: str) -> None:
    response = await client.post(f"/v1/projects/{project}/documents", json={"documents": list(CORPUS)})
    assert response.status_code == 201, response.text
    for item in CORPUS:
        await wait_indexed(client, project, item["id"])


async def query(client, project: str, caller: str, text: str = "ttl cache results") -> dict:
    response = await client.get(
        "/memory/query", params={"query": text, "project": project}, headers={"x-client-id": caller}
    )
    assert response.status_code == 200, response.text
    return response.json()


async def test_zero_percent_sends_every_caller_to_semantic_only(ops_app, unique_name) -> None:
    async with ops_app.client(hybrid_rollout_percent=0) as client:
        await ingest_corpus(client, unique_name)
        bodies = [await query(client, unique_name, f"caller-{number}") for number in range(20)]

    assert {body["rollout_arm"] for body in bodies} == {"semantic"}
    assert {body["search_strategy"] for body in bodies} == {"Semantic"}


async def test_the_semantic_arm_serves_a_request_with_fusion_options_naming_them_unused(ops_app, unique_name) -> None:
    # The arm is the service's choice, not the caller's: its fusion options are not refused, only left unused.
    body = {"query": "ttl cache results", "project": unique_name, "fusion": "rrf", "rrf_k": 20, "explain": True}
    async with ops_app.client(hybrid_rollout_percent=0) as client:
        await ingest_corpus(client, unique_name)
        response = await client.post("/v1/search", json=body, headers={"x-client-id": "arm-caller"})

    assert response.status_code == 200, response.text
    answer = response.json()
    assert (answer["rollout_arm"], answer["search_strategy"]) == ("semantic", "Semantic")
    assert answer["query_analysis"]["unused_options"] == ["fusion", "rrf_k"]


async def test_one_caller_never_switches_arm_and_both_arms_are_served(ops_app, unique_name) -> None:
    callers = [f"sticky-{number}" for number in range(12)]
    async with ops_app.client(hybrid_rollout_percent=50) as client:
        await ingest_corpus(client, unique_name)
        arms = {caller: set() for caller in callers}
        for round_number in range(3):
            for caller in callers:
                body = await query(client, unique_name, caller, text=f"ttl cache round {round_number}")
                arms[caller].add((body["rollout_arm"], body["search_strategy"]))

    assert all(len(seen) == 1 for seen in arms.values()), arms
    served = {next(iter(seen)) for seen in arms.values()}
    assert served == {("hybrid", "Hybrid"), ("semantic", "Semantic")}
    for caller, seen in arms.items():
        assert next(iter(seen))[0] == assign_arm(f"client:{caller}", hybrid_percent=50)


async def test_shadow_mode_records_overlap_between_the_arms(ops_app, unique_name) -> None:
    observations_before = sample("poimen_shadow_overlap_at_10_count")
    below_full_before = sample("poimen_shadow_overlap_at_10_bucket", le="0.9")
    shadow_durations_before = sum(
        sample("poimen_shadow_search_duration_seconds_count", arm=arm) for arm in ("hybrid", "semantic")
    )
    async with ops_app.client(hybrid_rollout_percent=50, rollout_shadow_enabled=True) as client:
        await ingest_corpus(client, unique_name)
        for number in range(4):
            await query(client, unique_name, f"shadowed-{number}", text=f"vacuum storage {number}")
        deadline = time.monotonic() + 5
        while sample("poimen_shadow_overlap_at_10_count") < observations_before + 4 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)

    assert sample("poimen_shadow_overlap_at_10_count") == observations_before + 4
    shadow_durations = sum(
        sample("poimen_shadow_search_duration_seconds_count", arm=arm) for arm in ("hybrid", "semantic")
    )
    assert shadow_durations == shadow_durations_before + 4  # every shadow search's latency, under its arm
    # The corpus is three documents: both arms return all of them, so each overlap is 1.
    assert sample("poimen_shadow_overlap_at_10_bucket", le="0.9") == below_full_before


@pytest.mark.parametrize("percent", [0, 1, 10, 25, 50, 75, 90, 100])
def test_the_hybrid_share_over_ten_thousand_callers_is_within_two_points(percent: float) -> None:
    hybrid = sum(
        assign_arm(f"client:synthetic-{number}", hybrid_percent=percent) == "hybrid"
        for number in range(SYNTHETIC_CALLERS)
    )

    assert abs(100 * hybrid / SYNTHETIC_CALLERS - percent) <= 2


def test_raising_the_percentage_only_moves_callers_to_hybrid() -> None:
    callers = [f"client:synthetic-{number}" for number in range(SYNTHETIC_CALLERS)]
    at_20 = {caller for caller in callers if assign_arm(caller, hybrid_percent=20) == "hybrid"}
    at_30 = {caller for caller in callers if assign_arm(caller, hybrid_percent=30) == "hybrid"}

    assert at_20 < at_30
