"""A variable that is no setting but is spelt almost like one is named at start, with the one it probably means.

pydantic-settings ignores variables it has no field for (the environment also holds PATH, HOME, ...), so
`HYBRID_ROLOUT_PERCENT=20` left the rollout at 100 % without a word.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from app.misspelt_settings import misspelt_settings

if TYPE_CHECKING:
    from pathlib import Path

# What a container's environment holds besides the settings: the shell's, Kubernetes' service links of a Service
# named poimen-memory, and the variables of the libraries the service runs with (asyncpg, OpenTelemetry, flagd).
FOREIGN = [
    "PATH",
    "HOME",
    "HOSTNAME",
    "LANG",
    "PWD",
    "SHELL",
    "USER",
    "TERM",
    "PYTHONPATH",
    "PYTHONUNBUFFERED",
    "KUBERNETES_SERVICE_HOST",
    "POIMEN_MEMORY_SERVICE_HOST",
    "POIMEN_MEMORY_SERVICE_PORT",
    "POIMEN_MEMORY_PORT",
    "POIMEN_MEMORY_PORT_8080_TCP_ADDR",
    "POIMEN_MIGRATIONS_DIR",
    "PROMETHEUS_MULTIPROC_DIR",
    "PGSSLMODE",
    "PGSSLROOTCERT",
    "PGPASSWORD",
    "PGHOST",
    "OTEL_SERVICE_NAME",
    "OTEL_RESOURCE_ATTRIBUTES",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
    "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT",
    "OTEL_EXPORTER_OTLP_HEADERS",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "FLAGD_TLS",
    "FLAGD_DEADLINE_MS",
    "FLAGD_SOCKET_PATH",
    "FLAGD_OFFLINE_POLL_MS",
    "HF_HUB_OFFLINE",
    "TRANSFORMERS_OFFLINE",
    "TOKENIZERS_PARALLELISM",
    "OMP_NUM_THREADS",
    "EMBEDDING_ONNX_DIR",
    "DATABASE_URL",
]


def test_a_variable_spelt_almost_like_a_setting_is_named_with_the_setting() -> None:
    environment = {"HYBRID_ROLOUT_PERCENT": "20", "outbox_poll_intervals": "5", "LOG_LEVL": "debug", "PATH": "/bin"}

    found = misspelt_settings(environment, env_file=None)

    assert found == [
        ("HYBRID_ROLOUT_PERCENT", "HYBRID_ROLLOUT_PERCENT"),
        ("LOG_LEVL", "LOG_LEVEL"),
        ("outbox_poll_intervals", "OUTBOX_POLL_INTERVAL_S"),
    ]


def test_settings_and_the_variables_of_the_shell_kubernetes_and_the_libraries_are_never_named() -> None:
    assert misspelt_settings(dict.fromkeys(FOREIGN, "x"), env_file=None) == []


def test_settings_in_any_case_and_reference_aliases_are_no_misspellings() -> None:
    assert (
        misspelt_settings({"rrf_k_constant": "5", "FINAL_RESULT_K": "3", "Search_Strategy": "hybrid"}, env_file=None)
        == []
    )


def test_a_misspelt_key_of_the_env_file_is_named_too(tmp_path: Path) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text("RRF_K_CONSTANTS=7\nRRF_K_CONSTANT=5\n# HYBRID_ROLOUT_PERCENT=1\n")

    assert misspelt_settings({}, env_file=env_file) == [("RRF_K_CONSTANTS", "RRF_K_CONSTANT")]


@pytest.mark.parametrize("name", ["PATH", "HOME", "TERM", "LANG", "USER"])
def test_short_variables_of_every_shell_match_nothing(name: str) -> None:
    assert misspelt_settings({name: "x"}, env_file=None) == []
