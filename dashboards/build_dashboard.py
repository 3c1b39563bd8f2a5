"""Generate dashboards/poimen-memory.json, the Grafana dashboard of the service, with grafana-foundation-sdk.

    python dashboards/build_dashboard.py           rewrite the committed JSON
    python dashboards/build_dashboard.py --check   exit 1 when the committed JSON differs from this code

Every PromQL expression names only metrics of the metric contract (the `poimen_` metrics of
app/observability.py and the `poimen_http_` metrics of Litestar's Prometheus middleware);
tests/deploy/test_dashboard.py checks that. Rows are ordered for a rollout: rollout state first, then
traffic and errors by arm, latency per stage, cache/fallbacks/engines, ingestion; load shedding last (a
new row goes at the end, so the panel ids of the rows before it, and links to them, stay as they were).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from grafana_foundation_sdk.builders import common as common_builders
from grafana_foundation_sdk.builders import dashboard, prometheus, stat, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models.dashboard import (
    DashboardCursorSync,
    DataSourceRef,
    Threshold,
    ThresholdsMode,
    VariableOption,
    VariableRefresh,
    VariableSort,
)

if TYPE_CHECKING:
    from grafana_foundation_sdk.cog.builder import Builder
    from grafana_foundation_sdk.cog.variants import Dataquery
    from grafana_foundation_sdk.models.dashboard import Dashboard as DashboardModel

OUTPUT = Path(__file__).with_name("poimen-memory.json")
UID = "poimen-memory"
DATASOURCE = DataSourceRef(type_val="prometheus", uid="${datasource}")
SELECTOR = 'namespace=~"$namespace"'
ARM = 'arm=~"$arm"'
RATE_WINDOW = "$__rate_interval"
STAGES_HELP = "stage: optimize, embed, semantic, lexical, fusion, rerank, total"
ERROR = 'outcome="error"'
DEGRADED = 'outcome="degraded"'
CACHE_HIT = 'result="hit"'
ZERO_RESULTS_BUCKET = 'le="0.0"'  # prometheus-client writes the bucket bound 0 as "0.0"


SERVER_ERROR = 'status_code=~"5.."'


def rate(metric: str, matchers: str = "") -> str:
    """`rate(metric{namespace filter, matchers}[$__rate_interval])`."""
    labels = f"{SELECTOR},{matchers}" if matchers else SELECTOR
    return f"rate({metric}{{{labels}}}[{RATE_WINDOW}])"


def query(expr: str, legend: str, ref_id: str = "A") -> Builder[Dataquery]:
    return prometheus.Dataquery().expr(expr).legend_format(legend).ref_id(ref_id).range()


def series(  # noqa: PLR0913 - a panel is its options; a settings object would only move them
    title: str,
    description: str,
    targets: list[Builder[Dataquery]],
    *,
    unit: str,
    width: int = 8,
    stacked: bool = False,
    max_value: float | None = None,
) -> timeseries.Panel:
    panel = (
        timeseries.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .targets(targets)
        .unit(unit)
        .min(0)
        .span(width)
        .height(8)
        .fill_opacity(10)
        .legend(
            common_builders.VizLegendOptions()
            .display_mode(common.LegendDisplayMode.TABLE)
            .placement(common.LegendPlacement.BOTTOM)
            .show_legend(show_legend=True)
        )
        .tooltip(
            common_builders.VizTooltipOptions().mode(common.TooltipDisplayMode.MULTI).sort(common.SortOrder.DESCENDING)
        )
    )
    if stacked:
        panel = panel.stacking(common_builders.StackingConfig().mode(common.StackingMode.NORMAL))
    if max_value is not None:
        panel = panel.max(max_value)
    return panel


def single_stat(
    title: str, description: str, targets: list[Builder[Dataquery]], *, unit: str, thresholds: list[Threshold]
) -> stat.Panel:
    return (
        stat.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .targets(targets)
        .unit(unit)
        .span(6)
        .height(4)
        .graph_mode(common.BigValueGraphMode.AREA)
        .color_mode(common.BigValueColorMode.VALUE)
        .thresholds(dashboard.ThresholdsConfig().mode(ThresholdsMode.ABSOLUTE).steps(thresholds))
    )


def quantile(q: float, metric: str, by: str, matchers: str = "") -> str:
    return f"histogram_quantile({q}, sum by (le, {by}) ({rate(metric + '_bucket', matchers)}))"


def rollout_row() -> list[timeseries.Panel | stat.Panel]:
    assignments = "poimen_rollout_assignments_total"
    return [
        single_stat(
            "Hybrid rollout % (configured)",
            "poimen_rollout_hybrid_percent: the effective HYBRID_ROLLOUT_PERCENT. Max and min over pods differ "
            "only while the flags ConfigMap is still propagating.",
            [
                query(f"max(poimen_rollout_hybrid_percent{{{SELECTOR}}})", "max over pods"),
                query(f"min(poimen_rollout_hybrid_percent{{{SELECTOR}}})", "min over pods", "B"),
            ],
            unit="percent",
            thresholds=[Threshold(color="blue")],
        ),
        single_stat(
            "Flag reload errors (range)",
            "poimen_flags_reload_errors_total: a bad flags file; the pods keep the last good flags. Must stay 0.",
            [query(f"sum(increase(poimen_flags_reload_errors_total{{{SELECTOR}}}[$__range]))", "errors")],
            unit="short",
            thresholds=[Threshold(color="green"), Threshold(value=1, color="red")],
        ),
        single_stat(
            "Flags in force (fingerprint, min and max over pods)",
            "poimen_flags_fingerprint: the flags' values hashed; min = max when every pod applied the same values. "
            "(poimen_flags_version counts the changes each pod applied: a pod started since counts from 1.)",
            [
                query(f"min(poimen_flags_fingerprint{{{SELECTOR}}})", "min"),
                query(f"max(poimen_flags_fingerprint{{{SELECTOR}}})", "max", "B"),
            ],
            unit="none",
            thresholds=[Threshold(color="text")],
        ),
        single_stat(
            "Shadow overlap@10 (mean)",
            "poimen_shadow_overlap_at_10 (shadow mode): mean overlap of the top 10 between the served and the "
            "shadow arm. Low values mean the hybrid arm really changes what callers see.",
            [
                query(
                    f"sum({rate('poimen_shadow_overlap_at_10_sum')}) / sum({rate('poimen_shadow_overlap_at_10_count')})",
                    "overlap@10",
                )
            ],
            unit="percentunit",
            thresholds=[Threshold(color="orange"), Threshold(value=0.3, color="green")],
        ),
        series(
            "Rollout share by arm (observed)",
            "Share of rollout assignments per arm (poimen_rollout_assignments_total). Should track the configured "
            "percentage within a few points; sticky per caller, so it moves in steps as callers come and go.",
            [
                query(
                    f"sum by (arm) ({rate(assignments)}) / scalar(sum({rate(assignments)}))",
                    "{{arm}}",
                )
            ],
            unit="percentunit",
            width=12,
            stacked=True,
            max_value=1,
        ),
        series(
            "Shadow overlap@10 quantiles",
            "p10 / p50 of overlap@10 between arms (poimen_shadow_overlap_at_10).",
            [
                query(
                    f"histogram_quantile(0.1, sum by (le) ({rate('poimen_shadow_overlap_at_10_bucket')}))",
                    "p10",
                ),
                query(
                    f"histogram_quantile(0.5, sum by (le) ({rate('poimen_shadow_overlap_at_10_bucket')}))",
                    "p50",
                    "B",
                ),
            ],
            unit="percentunit",
            width=12,
            max_value=1,
        ),
    ]


def shadow_latency() -> timeseries.Panel:
    shadow = "poimen_shadow_search_duration_seconds"
    return series(
        "Shadow search latency by arm (p50 / p95)",
        f"{shadow}: how long the other arm's search takes off the response path (shadow mode), next to the "
        "overlap panels: what switching arms would cost.",
        [
            query(quantile(q, shadow, "arm"), f"p{int(q * 100)} {{{{arm}}}}", ref)
            for q, ref in ((0.5, "A"), (0.95, "B"))
        ],
        unit="s",
        width=12,
    )


def traffic_row() -> list[timeseries.Panel | stat.Panel]:
    queries = "poimen_queries_total"
    return [
        series(
            "Query rate by strategy and arm",
            "poimen_queries_total per second, every outcome.",
            [query(f"sum by (strategy, arm) ({rate(queries)})", "{{strategy}} / {{arm}}")],
            unit="reqps",
        ),
        series(
            "Error ratio by strategy and arm",
            "Share of queries with outcome=error (5xx to the caller). Compare the arms during a rollout step.",
            [
                query(
                    f"sum by (strategy, arm) ({rate(queries, ERROR)}) / sum by (strategy, arm) ({rate(queries)})",
                    "{{strategy}} / {{arm}}",
                )
            ],
            unit="percentunit",
        ),
        series(
            "Degraded ratio by arm",
            "outcome=degraded: answered with a degraded reason (a leg lost, lexical hits unconfirmed, rerank "
            "skipped). Searches refused for input, auth or rate are no search run: they show as 4xx in "
            "'HTTP requests by status'.",
            [
                query(
                    f"sum by (arm) ({rate(queries, DEGRADED)}) / sum by (arm) ({rate(queries)})",
                    "degraded {{arm}}",
                ),
            ],
            unit="percentunit",
        ),
        series(
            "HTTP requests by status",
            "poimen_http_requests_total from the HTTP middleware, every route. Requests shed for overload (503, "
            "MAX_CONCURRENT_REQUESTS) never reach the middleware and are not counted here: see 'Requests shed by "
            "reason'; nor are heads the server refuses (400, 408, 414, 431): see 'Requests refused before the app'.",
            [query(f"sum by (status_code) ({rate('poimen_http_requests_total')})", "{{status_code}}")],
            unit="reqps",
            width=12,
            stacked=True,
        ),
        series(
            "HTTP 5xx rate",
            "poimen_http_requests_total with a 5xx status_code: the service failed the request. Overload 503s are "
            "not counted here (the limiter runs before the HTTP middleware): see 'Requests shed by reason'.",
            [query(f"sum by (method) ({rate('poimen_http_requests_total', SERVER_ERROR)})", "{{method}}")],
            unit="reqps",
            width=12,
        ),
    ]


def latency_row() -> list[timeseries.Panel | stat.Panel]:
    stage_metric = "poimen_query_stage_duration_seconds"
    panels: list[timeseries.Panel | stat.Panel] = [
        series(
            f"Latency p{int(q * 100)} per stage and arm",
            f"{stage_metric}, {STAGES_HELP}; the arms chosen in the `arm` variable, each on its own line.",
            [query(quantile(q, stage_metric, "stage, arm", ARM), "{{stage}} / {{arm}}")],
            unit="s",
        )
        for q in (0.5, 0.95, 0.99)
    ]
    panels.append(
        series(
            "End-to-end latency by arm (p50 / p95 / p99)",
            f'{stage_metric}{{stage="total"}} by rollout arm: the latency cost of the hybrid arm.',
            [
                query(quantile(q, stage_metric, "arm", 'stage="total"'), f"p{int(q * 100)} {{{{arm}}}}", ref)
                for q, ref in ((0.5, "A"), (0.95, "B"), (0.99, "C"))
            ],
            unit="s",
            width=12,
        )
    )
    panels.append(
        series(
            "End-to-end latency p95 by strategy",
            f'{stage_metric}{{stage="total"}} by strategy.',
            [query(quantile(0.95, stage_metric, "strategy", 'stage="total"'), "{{strategy}}")],
            unit="s",
            width=12,
        )
    )
    return panels


def engines_row() -> list[timeseries.Panel | stat.Panel]:
    cache = "poimen_query_cache_requests_total"
    results = "poimen_query_results"
    return [
        series(
            "Cache hit ratio",
            "poimen_query_cache_requests_total hits / (hits + misses). Drops after every ingest into a project "
            "(its entries are invalidated) and after a flags change (the flags version is in the key).",
            [query(f"sum({rate(cache, CACHE_HIT)}) / sum({rate(cache)})", "hit ratio")],
            unit="percentunit",
            width=6,
            max_value=1,
        ),
        series(
            "Fallback rate by reason and arm",
            "poimen_fallbacks_total: one count per degraded reason of a search (a leg unavailable or timed out, "
            "lexical hits left unconfirmed, the rerank stage skipped), for searches answered degraded and for "
            "searches that failed outright (outcome=error).",
            [query(f"sum by (reason, arm) ({rate('poimen_fallbacks_total', ARM)})", "{{reason}} / {{arm}}")],
            unit="reqps",
            width=6,
        ),
        series(
            "Engine errors by engine and arm",
            "poimen_engine_errors_total: errors translated at the adapter boundary (pgvector, postgres, tantivy, "
            "opensearch, embedder); arm=none is work that serves no search: writes an engine refused (an ingest "
            "while PostgreSQL is down) and the outbox worker.",
            [query(f"sum by (engine, arm) ({rate('poimen_engine_errors_total')})", "{{engine}} / {{arm}}")],
            unit="reqps",
            width=6,
        ),
        series(
            "Results per query (p50) and zero-result ratio",
            "poimen_query_results: hits returned per query; the zero-result share is the le=0 bucket over the count.",
            [
                query(quantile(0.5, results, "strategy"), "p50 {{strategy}}"),
                query(
                    f"sum({rate(results + '_bucket', ZERO_RESULTS_BUCKET)}) / sum({rate(results + '_count')})",
                    "zero-result ratio",
                    "B",
                ),
            ],
            unit="short",
            width=6,
        ),
    ]


def ingestion_row() -> list[timeseries.Panel | stat.Panel]:
    return [
        series(
            "Lexical outbox backlog",
            "poimen_lexical_outbox_backlog: documents stored in PostgreSQL but not yet in the lexical index. "
            "Grows while OpenSearch is down and must drain after it returns.",
            [query(f"max(poimen_lexical_outbox_backlog{{{SELECTOR}}})", "backlog")],
            unit="short",
        ),
        series(
            "Lexical outbox lag",
            "poimen_lexical_outbox_oldest_age_seconds: how long the oldest pending outbox entry has waited, i.e. how "
            "far the lexical leg lags PostgreSQL (the semantic leg sees a write at once). Every replica reports the "
            "same shared outbox, so the max is shown.",
            [query(f"max(poimen_lexical_outbox_oldest_age_seconds{{{SELECTOR}}})", "oldest pending")],
            unit="s",
        ),
        series(
            "Ingested documents by status",
            "poimen_ingested_documents_total per second (created, updated, unchanged, deleted).",
            [query(f"sum by (status) ({rate('poimen_ingested_documents_total')})", "{{status}}")],
            unit="ops",
            stacked=True,
        ),
        series(
            "Ingested chunks",
            "poimen_ingested_chunks_total per second (embedded and written).",
            [query(f"sum({rate('poimen_ingested_chunks_total')})", "chunks/s")],
            unit="ops",
        ),
    ]


def shedding_row() -> list[timeseries.Panel | stat.Panel]:
    shed = "poimen_requests_shed_total"
    return [
        series(
            "Requests shed by reason",
            f"{shed} per second. overload: 503 + Retry-After, more than MAX_CONCURRENT_REQUESTS in flight in a "
            "process; refused before routing and the HTTP middleware, so these 503s appear in no poimen_http_ "
            "metric and in no query metric, only here. rate_limit: 429 + Retry-After, a caller over "
            "RATE_LIMIT_PER_CALLER_RPS; refused_auth: 429 + Retry-After, a client address past its refused "
            "authentications (RATE_LIMIT_REFUSED_AUTH_PER_ADDRESS_RPS); both also counted in the HTTP panels.",
            [query(f"sum by (reason) ({rate(shed)})", "{{reason}}")],
            unit="reqps",
            width=24,
        ),
    ]


def refusals_row() -> list[timeseries.Panel | stat.Panel]:
    key_file_errors = "poimen_jwt_key_file_reload_errors_total"
    refused = "poimen_http_requests_refused_total"
    return [
        single_stat(
            "JWT key file refusals (range)",
            f"{key_file_errors}: new contents of JWT_JWKS_FILE or JWT_PUBLIC_KEY_FILE refused (half written, not "
            "a key, no signing key); the pods keep the keys they had, so tokens of a key only the new file holds "
            "are refused (401). Must stay 0; alert PoimenJwtKeyFileRefused.",
            [query(f"sum(increase({key_file_errors}{{{SELECTOR}}}[$__range]))", "refusals")],
            unit="short",
            thresholds=[Threshold(color="green"), Threshold(value=1, color="red")],
        ),
        series(
            "Requests refused before the app",
            f"{refused} per second, answered by the HTTP protocol before routing: malformed (400, a head the "
            "parser cannot read), head_timeout (408, a head not whole in 20 s), target_too_long (414, a URL over "
            "the 64 KiB head cap), head_too_large (431). In no other HTTP panel; a steady rate is a client or a "
            "proxy sending what the server refuses.",
            [query(f"sum by (status, reason) ({rate(refused)})", "{{status}} {{reason}}")],
            unit="reqps",
            width=18,
        ),
    ]


def build() -> DashboardModel:
    """The dashboard model; `json.dumps(build(), cls=JSONEncoder)` is the importable JSON."""
    datasource = (
        dashboard.DatasourceVariable("datasource")
        .label("Prometheus")
        .type("prometheus")
        .current(VariableOption(selected=True, text="default", value="default"))
    )
    namespace = (
        dashboard.QueryVariable("namespace")
        .label("Namespace")
        .datasource(DATASOURCE)
        .query("label_values(poimen_queries_total, namespace)")
        .refresh(VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(VariableSort.ALPHABETICAL_ASC)
        .multi(multi=True)
        .include_all(include_all=True)
        .all_value(".*")
    )
    arm = (
        dashboard.CustomVariable("arm")
        .label("Arm")
        .values("hybrid,semantic,control")
        .multi(multi=True)
        .include_all(include_all=True)
        .all_value(".*")
        .current(VariableOption(selected=True, text="All", value="$__all"))
    )
    builder = (
        dashboard.Dashboard("Poimen Memory Search")
        .uid(UID)
        .description("Hybrid retrieval service: rollout, traffic and errors by arm, stage latency, engines, ingestion.")
        .tags(["poimen", "search", "rollout"])
        .editable()
        .tooltip(DashboardCursorSync.CROSSHAIR)
        .refresh("30s")
        .time("now-3h", "now")
        .timezone("browser")
        .with_variable(datasource)
        .with_variable(namespace)
        .with_variable(arm)
    )
    rows = (
        ("Rollout (hybrid_rollout_percent)", [*rollout_row(), shadow_latency()]),
        ("Traffic and errors", traffic_row()),
        ("Latency", latency_row()),
        ("Cache, fallbacks and engines", engines_row()),
        ("Ingestion", ingestion_row()),
        ("Load shedding", shedding_row()),
        ("Refused requests and auth keys", refusals_row()),
    )
    panel_id = 0
    for title, panels in rows:
        panel_id += 1
        builder = builder.with_row(dashboard.Row(title).id(panel_id))
        for panel in panels:
            panel_id += 1
            builder = builder.with_panel(panel.id(panel_id))  # stable ids keep panel links (viewPanel=N) valid
    return builder.build()


def render() -> str:
    """The committed JSON text: stable key order, two-space indent, trailing newline."""
    return json.dumps(build(), cls=JSONEncoder, indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="fail when the committed JSON is stale")
    parser.add_argument("--output", type=Path, default=OUTPUT)
    arguments = parser.parse_args(argv)
    text = render()
    if arguments.check:
        current = arguments.output.read_text(encoding="utf-8") if arguments.output.exists() else ""
        if current != text:
            sys.stderr.write(f"{arguments.output} is stale: run python dashboards/build_dashboard.py\n")
            return 1
        sys.stdout.write(f"{arguments.output} is up to date\n")
        return 0
    arguments.output.write_text(text, encoding="utf-8")
    sys.stdout.write(f"wrote {arguments.output}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
