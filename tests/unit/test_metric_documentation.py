"""docs/operations.md's metric table and the metric objects agree: names, types and labels, both ways.

The HTTP middleware's `poimen_http_*` families exist only once an app served a request: the ops tier checks
them against the same table (tests/ops/test_metrics_http.py).
"""

from __future__ import annotations

import re
from pathlib import Path

from prometheus_client.metrics import MetricWrapperBase

import app.observability.metrics as observability_metrics
from app.observability import refused_requests

OPERATIONS = Path(__file__).resolve().parents[2] / "docs" / "operations.md"
HTTP_PREFIX = "poimen_http_"


def documented_metrics() -> dict[str, tuple[str, frozenset[str]]]:
    """Metric name (as exposed, `_total` included) -> (type, label names), from the "Metrics" table."""
    section = OPERATIONS.read_text(encoding="utf-8").split("\n## Metrics\n", 1)[1].split("\n## ", 1)[0]
    documented: dict[str, tuple[str, frozenset[str]]] = {}
    for row in section.splitlines():
        cells = [cell.strip() for cell in row.strip().strip("|").split("|")]
        if len(cells) < 3 or not cells[0].startswith("`poimen_"):
            continue
        names = re.findall(r"`(poimen_\w+)`", cells[0])
        types = [kind.strip() for kind in cells[1].split(",")]
        labels = frozenset(re.findall(r"`(\w+)`", cells[2]))
        for name, kind in zip(names, types * len(names) if len(types) == 1 else types, strict=True):
            documented[name] = (kind, labels)
    return documented


def test_the_table_is_read() -> None:
    documented = documented_metrics()

    assert documented["poimen_query_stage_duration_seconds"] == ("histogram", {"stage", "strategy", "arm"})
    assert documented["poimen_ingested_chunks_total"] == ("counter", frozenset())
    assert documented["poimen_http_requests_in_progress"] == ("gauge", {"method", "path", "status_code", "app_name"})


def test_every_metric_object_is_documented_with_its_type_and_labels() -> None:
    objects = {
        metric._name + ("_total" if metric._type == "counter" else ""): (metric._type, frozenset(metric._labelnames))
        for module in (observability_metrics, refused_requests)
        for metric in vars(module).values()
        if isinstance(metric, MetricWrapperBase)
    }
    # The middleware's `poimen_http_*` families are checked by the ops tier; the refused-requests one is ours.
    documented = {
        name: row for name, row in documented_metrics().items() if not name.startswith(HTTP_PREFIX) or name in objects
    }

    assert objects == documented
