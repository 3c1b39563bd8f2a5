"""Unit-tier fixtures shared by more than one module."""

from __future__ import annotations

import logging

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from app.config import Settings
from app.observability.logs import THIRD_PARTY_LOGGERS, TRACE_HEADER_LOGGERS
from app.observability.tracing import configure_tracing


@pytest.fixture
def restore_root_logger():
    """The root logger and the libraries' loggers as they were, after a test that calls `configure_logging`."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    libraries = {
        name: (logging.getLogger(name).level, list(logging.getLogger(name).filters))
        for name in THIRD_PARTY_LOGGERS + TRACE_HEADER_LOGGERS
    }
    yield root
    root.handlers[:] = handlers
    root.setLevel(level)
    for name, (library_level, filters) in libraries.items():
        logging.getLogger(name).setLevel(library_level)
        logging.getLogger(name).filters[:] = filters


@pytest.fixture
def spans() -> InMemorySpanExporter:
    """Spans a test's traced code ends, kept in memory (the tracer is configured for the test, not globally)."""
    exporter = InMemorySpanExporter()
    configure_tracing(
        Settings(_env_file=None, otel_exporter_otlp_endpoint=None, tracing_enabled=True),
        span_processors=[SimpleSpanProcessor(exporter)],
        set_global=False,
    )
    return exporter
