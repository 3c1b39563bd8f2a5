"""The Grafana dashboard against the running service: every metric it queries, and every label it filters or
groups by, is really exported."""

from __future__ import annotations

import json
import re
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests.deploy.test_dashboard import dashboard_expressions, dashboard_metric_names, exported_metric_names

DASHBOARDS = sorted((Path(__file__).resolve().parents[2] / "dashboards").glob("*.json"))
TARGET_LABELS = frozenset({"namespace", "job", "pod", "instance", "service", "endpoint", "container"})
"""Labels Prometheus adds to every scraped series (the ServiceMonitor's target), not the service."""
_SELECTOR = re.compile(r"([A-Za-z_:][A-Za-z0-9_:]*)\{([^}]*)\}")
_MATCHER = re.compile(r"(\w+)\s*(?:=~|!~|!=|=)\s*\"")
_GROUPING = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)")


async def _scrape_after_traffic(api_client, project: str) -> str:
    await api_client.post(
        f"/v1/projects/{project}/documents",
        json={"id": "d1", "title": "Cache", "text": "# Caching\n\nA TTL cache keeps query results for a while."},
    )
    for strategy in ("hybrid", "semantic", "lexical", "cascading"):
        await api_client.get("/memory/query", params={"query": "ttl cache", "project": project, "strategy": strategy})
    scrape = await api_client.get("/metrics")
    assert scrape.status_code == 200
    return scrape.text


def label_names_by_series(exposition: str) -> dict[str, set[str]]:
    """Series name -> the label names its samples carry."""
    labels: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(exposition):
        for metric_sample in family.samples:
            labels.setdefault(metric_sample.name, set()).update(metric_sample.labels)
    return labels


def unknown_labels(expr: str, labels: dict[str, set[str]]) -> set[str]:
    """`metric.label` for each label an expression filters a metric by, or groups by, that no series of it has."""
    selectors = _SELECTOR.findall(expr)
    unknown = {
        f"{metric}.{label}"
        for metric, matchers in selectors
        for label in _MATCHER.findall(matchers)
        if label not in TARGET_LABELS and label not in labels.get(metric, set())
    }
    available = set().union(*(labels.get(metric, set()) for metric, _ in selectors))
    grouped = {label.strip() for group in _GROUPING.findall(expr) for label in group.split(",") if label.strip()}
    unknown |= {f"by.{label}" for label in grouped - TARGET_LABELS - available}
    return unknown


def test_label_check_finds_a_label_the_metric_does_not_have() -> None:
    labels = {"poimen_queries_total": {"strategy", "arm", "outcome"}}

    found = unknown_labels(
        'sum by (project) (rate(poimen_queries_total{namespace=~"$namespace",tenant="a",arm=~"$arm"}[5m]))', labels
    )

    assert found == {"poimen_queries_total.tenant", "by.project"}


async def test_every_dashboard_metric_is_exported_by_the_running_service(api_client, unique_name) -> None:
    scrape = await _scrape_after_traffic(api_client, unique_name)

    exported = exported_metric_names(scrape)
    used = set().union(*(dashboard_metric_names(json.loads(path.read_text("utf-8"))) for path in DASHBOARDS))
    assert used, "the dashboards query no metric"
    assert sorted(used - exported) == []


async def test_every_dashboard_label_is_exported_by_the_running_service(api_client, unique_name) -> None:
    scrape = await _scrape_after_traffic(api_client, unique_name)

    labels = label_names_by_series(scrape)
    problems = {
        where: sorted(unknown)
        for path in DASHBOARDS
        for where, expr in dashboard_expressions(json.loads(path.read_text("utf-8")))
        if (unknown := unknown_labels(expr, labels))
    }
    assert problems == {}
