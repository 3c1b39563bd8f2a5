"""`FLAGS_PROVIDER=openfeature` through HTTP: a flagd file decides the strategy, `/admin/flags` names the provider's
variant and reason, and a broken file degrades `/readyz` details without failing readiness."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from tests.ops.conftest import CORPUS, sample, wait_indexed
from tests.ops.test_flags_http import wait_for, write_atomically

if TYPE_CHECKING:
    from pathlib import Path


def flagd_file(strategy: str) -> str:
    return json.dumps(
        {
            "flags": {
                "search-strategy": {
                    "state": "ENABLED",
                    "variants": {"lexical": "lexical", "semantic": "semantic"},
                    "defaultVariant": strategy,
                }
            }
        }
    )


def openfeature_settings(path: Path) -> dict[str, object]:
    return {"flags_provider": "openfeature", "flagd_resolver": "in-process", "flagd_offline_flag_source_path": path}


async def test_a_flagd_file_decides_the_strategy_and_admin_flags_names_its_variant(
    ops_app, unique_name, tmp_path
) -> None:
    path = tmp_path / "flags.flagd.json"
    path.write_text(flagd_file("lexical"))
    async with ops_app.client(**openfeature_settings(path)) as client:
        response = await client.post(f"/v1/projects/{unique_name}/documents", json={"documents": list(CORPUS)})
        assert response.status_code == 201
        for item in CORPUS:
            await wait_indexed(client, unique_name, item["id"])
        params = {"query": "kubectl port-forward pod", "project": unique_name}
        before = (await client.get("/memory/query", params=params)).json()
        described = (await client.get("/admin/flags")).json()

        write_atomically(path, flagd_file("semantic"))

        async def semantic() -> dict | None:
            body = (await client.get("/memory/query", params=params)).json()
            return body if body["search_strategy"] == "Semantic" else None

        after = await wait_for(semantic)

    assert before["search_strategy"] == "Lexical"
    assert before["rollout_decided_by"] == "service"
    assert after is not None
    assert described["provider"] == "openfeature"
    assert described["flags"]["search_strategy"] == {
        "flag": "search-strategy",
        "value": "lexical",
        "source": "openfeature",
        "provider": "FlagdProvider",
        "variant": "lexical",
        "reason": "STATIC",
    }
    assert described["flags"]["rrf_k_constant"]["source"] == "default"
    assert sample("poimen_flag_evaluations_total", flag="search-strategy", variant="lexical", reason="static") > 0


async def test_a_broken_flagd_file_is_a_readyz_detail_not_a_readiness_failure(ops_app, tmp_path) -> None:
    path = tmp_path / "flags.flagd.json"
    path.write_text(flagd_file("lexical"))
    async with ops_app.client(**openfeature_settings(path)) as client:
        healthy = (await client.get("/readyz")).json()

        path.write_text('{"flags": ')

        async def degraded() -> dict | None:
            response = await client.get("/readyz")
            body = response.json()
            return body if response.status_code == 200 and "degraded" in body["details"]["flags"] else None

        broken = await wait_for(degraded)
        described = (await client.get("/admin/flags")).json()

    assert healthy["details"]["flags"] == "openfeature: ok"
    assert broken is not None
    assert broken["status"] == "ready"
    assert described["last_error"] is not None
    assert described["flags"]["search_strategy"]["value"] == "lexical"
