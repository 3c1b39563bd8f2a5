"""An empty (or blank) variable is a variable not set, for every setting: its default applies.

Helm values and compose files write `FOO: ""` for a value left out. Before, a list of fields read empty
as unset and the others took the empty text: `POIMEN_FLAGS_FILE=` watched the current directory as the
flags file (readiness "degraded: cannot read: Is a directory" forever, `poimen query` exit 2),
`OPENSEARCH_CA_FILE=` trusted the current directory as a CA folder, `POIMEN_DATA_DIR=` kept PostgreSQL
and the index in the current directory. The test enumerates the fields, so a new one cannot be forgotten.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from app.config import ConfigurationError, Settings, load_settings
from app.search.flags import FlagStore

if TYPE_CHECKING:
    from pathlib import Path

SETTING_NAMES = tuple(Settings.model_fields)


@pytest.fixture
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No setting in the environment (the suite's own EMBEDDING_ONNX_DIR included)."""
    for name in SETTING_NAMES:
        monkeypatch.delenv(name.upper(), raising=False)
    return monkeypatch


@pytest.mark.parametrize("blank", ["", "  "], ids=["empty", "blank"])
@pytest.mark.parametrize("name", SETTING_NAMES)
def test_every_setting_empty_in_the_environment_is_not_set(
    clean_environment: pytest.MonkeyPatch, name: str, blank: str
) -> None:
    clean_environment.setenv(name.upper(), blank)

    settings = Settings(_env_file=None)

    assert getattr(settings, name) == Settings.model_fields[name].get_default(call_default_factory=True)
    assert name not in settings.model_fields_set


def test_an_empty_variable_leaves_the_env_file_value_in_force(
    clean_environment: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text("POIMEN_FLAGS_FILE=/etc/poimen/flags.yaml\nLOG_LEVEL=debug\n")
    clean_environment.setenv("POIMEN_FLAGS_FILE", "")
    clean_environment.setenv("LOG_LEVEL", " ")

    settings = Settings(_env_file=env_file)

    assert (str(settings.poimen_flags_file), settings.log_level) == ("/etc/poimen/flags.yaml", "DEBUG")


@pytest.mark.usefixtures("clean_environment")
def test_an_empty_value_in_the_env_file_is_not_set(tmp_path: Path) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text("OPENSEARCH_CA_FILE=\nPOIMEN_DATA_DIR=\n")

    settings = Settings(_env_file=env_file)

    assert settings.opensearch_ca_file is None
    assert settings.poimen_data_dir == Settings.model_fields["poimen_data_dir"].default


def test_an_empty_flags_file_variable_watches_no_file(clean_environment: pytest.MonkeyPatch) -> None:
    clean_environment.setenv("POIMEN_FLAGS_FILE", "")

    store = FlagStore(Settings(_env_file=None))

    assert (store.path, store.problem(), store.describe()["file"]) == (None, None, None)


@pytest.mark.parametrize("value", [",", " , ,", ",,,"])
def test_routing_strategies_of_only_commas_stop_start_up_naming_how_to_route_none(
    clean_environment: pytest.MonkeyPatch, value: str
) -> None:
    # Not blank, so not unset: it validated to "" and routed no query, while `QUERY_ROUTING_STRATEGIES=`
    # routes to the default's (lexical). Naming no strategy is a mistake; routing none has its own switch.
    clean_environment.setenv("QUERY_ROUTING_STRATEGIES", value)

    with pytest.raises(ConfigurationError) as refused:
        load_settings()

    assert "QUERY_ROUTING_STRATEGIES: Value error, names no strategy" in str(refused.value)
    assert "to route no query, set QUERY_OPTIMIZATION_ENABLED=false" in str(refused.value)
