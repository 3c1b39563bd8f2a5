"""Settings whose values are words read them in any case, as SEARCH_STRATEGY and RANKING_ALGORITHM always did."""

from __future__ import annotations

import pytest

from app.config import ConfigurationError, load_settings


@pytest.mark.parametrize(
    ("name", "value", "field", "read"),
    [
        ("LOG_LEVEL", "debug", "log_level", "DEBUG"),
        ("LOG_LEVEL", " Warning ", "log_level", "WARNING"),
        ("AUTH_MODE", "OFF", "auth_mode", "off"),
        ("OPENSEARCH_AUTH", "Basic", "opensearch_auth", "basic"),
    ],
)
def test_a_word_setting_is_read_in_any_case(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, field: str, read: str
) -> None:
    monkeypatch.setenv(name, value)

    assert getattr(load_settings(), field) == read


def test_a_word_no_case_makes_right_is_still_refused_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOG_LEVEL", "verbose")

    with pytest.raises(ConfigurationError, match="LOG_LEVEL: Input should be 'DEBUG'"):
        load_settings()
