"""The Grafana dashboard against the running service: every metric it queries is really exported."""

from __future__ import annotations

import json
from pathlib import Path

from tests.deploy.test_dashboard import dashboard_metric_names, exported_metric_names

DASHBOARDS = sorted((Path(__file__).resolve().parents[2] / "dashboards").glob("*.json"))


async def test_every_dashboard_metric_is_exported_by_the_running_service(api_client, unique_name) -> None:
    await api_client.post(
        f"/v1/projects/{unique_name}/documents",
        json={"id": "d1", "title": "Cache", "text": "# Caching\n\nA TTL cache keeps query results for a while."},
    )
    for strategy in ("hybrid", "semantic", "lexical", "cascading"):
        await api_client.get(
            "/memory/query", params={"query": "ttl cache", "project": unique_name, "strategy": strategy}
        )

    scrape = await api_client.get("/metrics")

    assert scrape.status_code == 200
    exported = exported_metric_names(scrape.text)
    used = set().union(*(dashboard_metric_names(json.loads(path.read_text("utf-8"))) for path in DASHBOARDS))
    assert used, "the dashboards query no metric"
    assert sorted(used - exported) == []
