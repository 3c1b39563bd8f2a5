"""The flags file rewritten while the app runs: `/admin/flags` and query behaviour follow within a few polls."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from tests.ops.conftest import CORPUS, sample, wait_indexed

if TYPE_CHECKING:
    from pathlib import Path

POLL_INTERVAL_S = 0.1
WAIT_S = 5.0


def write_atomically(path: Path, content: str) -> None:
    """Replace the file in one rename, as the kubelet swaps a ConfigMap's `..data` link."""
    staging = path.with_name(path.name + ".tmp")
    staging.write_text(content)
    staging.replace(path)


async def wait_for(check, *, timeout_s: float = WAIT_S):
    deadline = time.monotonic() + timeout_s
    while True:
        value = await check()
        if value or time.monotonic() > deadline:
            return value
        await asyncio.sleep(POLL_INTERVAL_S / 2)


async def test_a_rewritten_flags_file_changes_admin_flags_and_queries_without_restart(
    ops_app, unique_name, tmp_path
) -> None:
    flags_file = tmp_path / "flags.yaml"
    flags_file.write_text("RRF_FINAL_K: 3\n")
    async with ops_app.client(poimen_flags_file=flags_file, flags_poll_interval_s=POLL_INTERVAL_S) as client:
        response = await client.post(f"/v1/projects/{unique_name}/documents", json={"documents": list(CORPUS)})
        assert response.status_code == 201
        for item in CORPUS:
            await wait_indexed(client, unique_name, item["id"])
        params = {"query": "kubectl port-forward pod", "project": unique_name}
        initial_flags = (await client.get("/admin/flags")).json()
        before = (await client.get("/memory/query", params=params)).json()

        write_atomically(flags_file, "search_strategy: lexical\nRRF_FINAL_K: 1\n")

        async def reloaded() -> dict | None:
            body = (await client.get("/admin/flags")).json()
            return body if body["version"] > initial_flags["version"] else None

        changed_flags = await wait_for(reloaded)
        after = (await client.get("/memory/query", params=params)).json()

    assert initial_flags["flags"]["rrf_final_k"] == {"value": 3, "source": "file"}
    assert initial_flags["flags"]["rrf_k_constant"]["source"] == "default"
    assert before["search_strategy"] == "Hybrid"
    assert len(before["results"]) == 3
    assert changed_flags is not None, "the flags change was not picked up"
    assert changed_flags["flags"]["search_strategy"] == {"value": "lexical", "source": "file"}
    assert changed_flags["flags"]["rrf_final_k"] == {"value": 1, "source": "file"}
    assert after["search_strategy"] == "Lexical"
    assert after["cached"] is False  # the flags version is part of every cache key
    assert [hit["document_id"] for hit in after["results"]] == ["kube"]


async def test_a_bad_flags_file_keeps_the_last_good_flags_and_counts_an_error(ops_app, unique_name, tmp_path) -> None:
    flags_file = tmp_path / "flags.json"
    flags_file.write_text('{"HYBRID_ROLLOUT_PERCENT": 0}')
    errors_before = sample("poimen_flags_reload_errors_total")
    async with ops_app.client(poimen_flags_file=flags_file, flags_poll_interval_s=POLL_INTERVAL_S) as client:
        good = (await client.get("/admin/flags")).json()

        write_atomically(flags_file, '{"HYBRID_ROLLOUT_PERCENT": 250, "oops": ')

        async def rejected() -> dict | None:
            body = (await client.get("/admin/flags")).json()
            return body if body["last_error"] else None

        after_bad = await wait_for(rejected)
        query = await client.get("/memory/query", params={"query": "ttl cache", "project": unique_name})

        write_atomically(flags_file, '{"HYBRID_ROLLOUT_PERCENT": 100}')

        async def recovered() -> dict | None:
            body = (await client.get("/admin/flags")).json()
            return body if body["flags"]["hybrid_rollout_percent"]["value"] == 100 else None

        after_fix = await wait_for(recovered)

    assert good["flags"]["hybrid_rollout_percent"] == {"value": 0, "source": "file"}
    assert after_bad is not None, "the bad file was not reported"
    assert after_bad["last_error"].startswith("cannot parse")
    assert after_bad["version"] == good["version"]
    assert after_bad["flags"] == good["flags"]
    assert sample("poimen_flags_reload_errors_total") == errors_before + 1
    assert query.json()["rollout_arm"] == "semantic"  # still the last good 0 %
    assert after_fix is not None
    assert after_fix["last_error"] is None
    assert after_fix["version"] == good["version"] + 1
    assert sample("poimen_rollout_hybrid_percent") == 100
