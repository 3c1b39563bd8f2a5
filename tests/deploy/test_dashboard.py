"""The Grafana dashboard names only metrics the service exports.

Every PromQL expression in dashboards/*.json (panel targets and template variables) is reduced to its
metric names, and each name must belong to the metric contract below (the metrics of
app/observability.py plus the HTTP metrics of Litestar's Prometheus middleware with prefix
`poimen_http`). A histogram may only be used through `_bucket`, `_sum` or `_count`.

`exported_metric_names()` turns a `/metrics` exposition into the same vocabulary, so a test that
scrapes the running service can check the dashboard against what the service really serves.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import Any, Literal

import pytest
from prometheus_client import REGISTRY, generate_latest
from prometheus_client.parser import text_string_to_metric_families

# Importing these registers the `poimen_` metric objects.
import app.observability.metrics
import app.observability.refused_requests  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]
DASHBOARDS = sorted((ROOT / "dashboards").glob("*.json"))

MetricType = Literal["counter", "gauge", "histogram"]

METRIC_CONTRACT: dict[str, MetricType] = {
    "poimen_query_stage_duration_seconds": "histogram",
    "poimen_queries_total": "counter",
    "poimen_flags_fingerprint": "gauge",
    "poimen_requests_shed_total": "counter",
    "poimen_query_cache_requests_total": "counter",
    "poimen_fallbacks_total": "counter",
    "poimen_engine_errors_total": "counter",
    "poimen_ingested_documents_total": "counter",
    "poimen_ingested_chunks_total": "counter",
    "poimen_lexical_outbox_backlog": "gauge",
    "poimen_lexical_outbox_oldest_age_seconds": "gauge",
    "poimen_query_results": "histogram",
    "poimen_flags_reload_errors_total": "counter",
    "poimen_jwt_key_file_reload_errors_total": "counter",
    "poimen_http_requests_refused_total": "counter",  # ours (app/observability/refused_requests.py)
    "poimen_flags_version": "gauge",
    "poimen_rollout_hybrid_percent": "gauge",
    "poimen_rollout_assignments_total": "counter",
    "poimen_shadow_overlap_at_10": "histogram",
    "poimen_shadow_search_duration_seconds": "histogram",
    # Litestar PrometheusConfig(app_name="poimen", prefix="poimen_http").
    "poimen_http_requests_total": "counter",
    "poimen_http_requests_error_total": "counter",
    "poimen_http_request_duration_seconds": "histogram",
    "poimen_http_requests_in_progress": "gauge",
}

HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")

# PromQL words that look like identifiers but are not metric names.
PROMQL_KEYWORDS = frozenset(
    {
        "sum", "avg", "min", "max", "count", "stddev", "stdvar", "topk", "bottomk", "quantile",
        "count_values", "group", "by", "without", "on", "ignoring", "group_left", "group_right",
        "bool", "and", "or", "unless", "offset", "atan2", "inf", "nan",
    }
)  # fmt: skip


def promql_metric_names(expr: str) -> set[str]:
    """Metric names an expression selects (functions, keywords, labels and Grafana variables removed)."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'', '""', expr)  # string literals
    expr = re.sub(r"\{[^}]*\}", " ", expr)  # label matchers
    expr = re.sub(r"\[[^\]]*\]", " ", expr)  # range and subquery windows
    expr = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", expr)  # label lists
    expr = re.sub(r"\$\{?\w+\}?", " ", expr)  # Grafana variables
    names = set()
    for match in re.finditer(r"(?<![\w.])[A-Za-z_:][A-Za-z0-9_:]*", expr):
        token = match.group()
        if expr[match.end() :].lstrip().startswith("("):
            continue  # a function or an aggregation operator
        if token.lower() in PROMQL_KEYWORDS:
            continue
        names.add(token)
    return names


def variable_metric_names(query: str) -> set[str]:
    """Metric names of a Grafana Prometheus variable query (`label_values(metric, label)` or PromQL)."""
    label_values = re.fullmatch(r"\s*label_values\(\s*([^,{)]+)(\{[^}]*\})?\s*,\s*\w+\s*\)\s*", query)
    if label_values:
        return {label_values.group(1).strip()}
    if re.fullmatch(r"\s*label_values\(\s*\w+\s*\)\s*", query):
        return set()  # label_values(label): every series, no metric named
    metrics_query = re.fullmatch(r"\s*(?:query_result|metrics)\((.*)\)\s*", query)
    return promql_metric_names(metrics_query.group(1) if metrics_query else query)


def contract_metric(name: str) -> str | None:
    """The contract metric a selected series name belongs to, or None."""
    if METRIC_CONTRACT.get(name) in {"counter", "gauge"}:
        return name
    for suffix in HISTOGRAM_SUFFIXES:
        base = name.removesuffix(suffix)
        if base != name and METRIC_CONTRACT.get(base) == "histogram":
            return base
    return None


def exported_metric_names(exposition: str) -> set[str]:
    """Series names a `/metrics` text exposition serves, including families that have no sample yet."""
    names: set[str] = set()
    for family in text_string_to_metric_families(exposition):
        if family.type == "histogram":
            names.update(family.name + suffix for suffix in HISTOGRAM_SUFFIXES)
        elif family.type == "counter":
            names.add(family.name + "_total")
        else:
            names.add(family.name)
        names.update(sample.name for sample in family.samples)
    return names


def _walk_panels(panels: list[dict[str, Any]]) -> list[dict[str, Any]]:
    found = []
    for panel in panels:
        found.append(panel)
        found.extend(_walk_panels(panel.get("panels", [])))  # panels inside collapsed rows
    return found


def dashboard_expressions(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    """(where, PromQL) for every panel target of a dashboard."""
    return [
        (f"panel {panel.get('title')!r}", target["expr"])
        for panel in _walk_panels(dashboard.get("panels", []))
        for target in panel.get("targets", [])
        if target.get("expr")
    ]


def dashboard_metric_names(dashboard: dict[str, Any]) -> dict[str, set[str]]:
    """Metric name -> where it is used, over panel targets and query variables."""
    used: dict[str, set[str]] = {}
    for where, expr in dashboard_expressions(dashboard):
        for name in promql_metric_names(expr):
            used.setdefault(name, set()).add(where)
    for variable in dashboard.get("templating", {}).get("list", []):
        if variable.get("type") != "query":
            continue
        query = variable.get("query")
        text = query.get("query", "") if isinstance(query, dict) else str(query or "")
        for name in variable_metric_names(text):
            used.setdefault(name, set()).add(f"variable {variable.get('name')!r}")
    return used


@pytest.fixture(scope="module", params=DASHBOARDS, ids=[path.name for path in DASHBOARDS])
def dashboard(request: pytest.FixtureRequest) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(request.param.read_text(encoding="utf-8"))
    return loaded


# --- the extractor itself ---------------------------------------------------------------------------


def test_extractor_drops_functions_labels_windows_and_variables() -> None:
    expr = (
        'histogram_quantile(0.95, sum by (le, stage) (rate(poimen_query_stage_duration_seconds_bucket{namespace=~"$ns",'
        'stage="total"}[$__rate_interval])))'
    )

    assert promql_metric_names(expr) == {"poimen_query_stage_duration_seconds_bucket"}


def test_extractor_finds_both_sides_of_a_ratio_and_ignores_numbers() -> None:
    expr = 'sum(rate(a_total{x="y"}[5m])) / ignoring(arm) group_left sum(rate(b_total[1h] offset 1d)) * 1e3 > 0.5'

    assert promql_metric_names(expr) == {"a_total", "b_total"}


def test_extractor_reads_label_values_variables() -> None:
    assert variable_metric_names("label_values(poimen_queries_total, namespace)") == {"poimen_queries_total"}
    assert variable_metric_names('label_values(up{job="x"}, instance)') == {"up"}
    assert variable_metric_names("label_values(namespace)") == set()


def test_contract_lookup_only_accepts_histogram_suffixes_on_histograms() -> None:
    assert contract_metric("poimen_query_results_bucket") == "poimen_query_results"
    assert contract_metric("poimen_queries_total") == "poimen_queries_total"
    assert contract_metric("poimen_query_results") is None  # a histogram has no bare series
    assert contract_metric("poimen_queries_total_count") is None
    assert contract_metric("process_cpu_seconds_total") is None


def test_exported_names_cover_families_without_samples() -> None:
    exposition = (
        "# HELP poimen_queries_total Queries.\n# TYPE poimen_queries_total counter\n"
        "# HELP poimen_query_results Hits.\n# TYPE poimen_query_results histogram\n"
        'poimen_query_results_bucket{le="+Inf"} 1.0\npoimen_query_results_count 1.0\npoimen_query_results_sum 3.0\n'
        "# HELP poimen_flags_version Version.\n# TYPE poimen_flags_version gauge\npoimen_flags_version 2.0\n"
    )

    names = exported_metric_names(exposition)

    assert {"poimen_queries_total", "poimen_query_results_bucket", "poimen_flags_version"} <= names


# --- the committed dashboards -----------------------------------------------------------------------


def test_there_is_a_dashboard() -> None:
    assert DASHBOARDS, "dashboards/*.json is empty"


def test_every_dashboard_metric_is_in_the_contract(dashboard: dict[str, Any]) -> None:
    used = dashboard_metric_names(dashboard)

    unknown = {name: sorted(where) for name, where in used.items() if contract_metric(name) is None}

    assert used, "no metric found in any expression"
    assert unknown == {}


def test_every_panel_queries_prometheus(dashboard: dict[str, Any]) -> None:
    panels = [panel for panel in _walk_panels(dashboard["panels"]) if panel.get("type") != "row"]

    without_targets = [panel["title"] for panel in panels if not panel.get("targets")]

    assert panels
    assert without_targets == []
    assert {panel["datasource"]["type"] for panel in panels} == {"prometheus"}


def test_panel_ids_are_unique(dashboard: dict[str, Any]) -> None:
    ids = [panel.get("id") for panel in _walk_panels(dashboard["panels"])]

    assert None not in ids
    assert len(ids) == len(set(ids))


def test_dashboard_covers_what_a_rollout_is_watched_by() -> None:
    dashboard = json.loads((ROOT / "dashboards" / "poimen-memory.json").read_text(encoding="utf-8"))
    expressions = [expr for _, expr in dashboard_expressions(dashboard)]

    def uses(fragment: str) -> bool:
        return any(fragment in expr for expr in expressions)

    assert uses("sum by (strategy, arm) (rate(poimen_queries_total"), "request rate by strategy and arm"
    assert uses('outcome="error"'), "error rate"
    for q in ("0.5", "0.95", "0.99"):
        assert uses(
            f"histogram_quantile({q}, sum by (le, stage, arm) (rate(poimen_query_stage_duration_seconds_bucket"
        ), q
    assert uses('poimen_query_cache_requests_total{namespace=~"$namespace",result="hit"}'), "cache hit ratio"
    assert uses("sum by (reason, arm) (rate(poimen_fallbacks_total"), "fallback rate by reason and arm"
    assert uses("sum by (engine, arm) (rate(poimen_engine_errors_total"), "engine errors by arm"
    assert uses("sum by (le, stage, arm) (rate(poimen_query_stage_duration_seconds_bucket"), "stage latency by arm"
    assert uses("poimen_shadow_search_duration_seconds_bucket"), "shadow-arm latency"
    assert uses("poimen_lexical_outbox_backlog"), "outbox backlog"
    assert uses("poimen_lexical_outbox_oldest_age_seconds"), "outbox lag"
    assert uses("sum by (arm) (rate(poimen_rollout_assignments_total"), "rollout share"
    assert uses("poimen_rollout_hybrid_percent"), "configured rollout percent"
    assert uses("poimen_jwt_key_file_reload_errors_total"), "refused JWT key files (new keys not taken)"
    assert uses("sum by (status, reason) (rate(poimen_http_requests_refused_total"), "heads refused before the app"


def test_committed_dashboard_is_what_the_generator_builds() -> None:
    pytest.importorskip("grafana_foundation_sdk", reason="pip install 'grafana-foundation-sdk==1769699998!10.1.0'")
    spec = importlib.util.spec_from_file_location("build_dashboard", ROOT / "dashboards" / "build_dashboard.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    assert module.render() == (ROOT / "dashboards" / "poimen-memory.json").read_text(encoding="utf-8")


def test_app_metrics_used_by_the_dashboard_are_registered() -> None:
    """The `poimen_` (non-HTTP) metrics are module-level objects of app.observability.metrics: importing it registers them.

    The HTTP metrics appear only after the middleware served a request; the live `/metrics` test covers them.
    """
    exported = exported_metric_names(generate_latest(REGISTRY).decode("utf-8"))
    used = set().union(*(dashboard_metric_names(json.loads(path.read_text("utf-8"))) for path in DASHBOARDS))

    missing = sorted(name for name in used if not name.startswith("poimen_http_") and name not in exported)

    assert missing == []
