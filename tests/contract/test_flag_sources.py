"""The flag-source contract on both adapters: the flags file over env, and OpenFeature with flagd in-process."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest
import yaml

from app.config import Settings
from app.engines.openfeature_flags import OpenFeatureKnobs
from app.knobs import KNOB_NAMES
from app.search.flags import FlagStore
from app.search.knob_source import flag_key
from app.wiring.services import build_flag_source
from tests.contract.flag_source import ENV_ROUTING_STRATEGIES, ENV_RRF_K, FlagSourceContract, eventually

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
    from pathlib import Path

    from app.search.knob_source import FlagSource

BROKEN_JSON = '{"flags": {"rrf-k-constant": '


def env_settings(monkeypatch: pytest.MonkeyPatch, **values: object) -> Settings:
    for name in KNOB_NAMES:
        monkeypatch.delenv(name.upper(), raising=False)
    monkeypatch.setenv("RRF_K_CONSTANT", str(ENV_RRF_K))
    monkeypatch.setenv("QUERY_ROUTING_STRATEGIES", ENV_ROUTING_STRATEGIES)
    return Settings(_env_file=None, **values)  # type: ignore[arg-type]


def flagd_definitions(values: Mapping[str, object]) -> dict[str, object]:
    """A flagd flag definition file that sets each knob to one static variant."""
    flags = {
        flag_key(name): {"state": "ENABLED", "variants": {"on": value}, "defaultVariant": "on"}
        for name, value in values.items()
    }
    return {"$schema": "https://flagd.dev/schema/v0/flags.json", "flags": flags}


def replace_file(path: Path, text: str) -> None:
    """Write next to `path` and rename over it, as a ConfigMap update or `mv` does."""
    staging = path.with_suffix(".next")
    staging.write_text(text)
    staging.replace(path)


class FlagsFileDefinitions:
    def __init__(self, settings: Settings, path: Path) -> None:
        self.path = path
        path.write_text("")
        self.store = FlagStore(settings, path=path)
        self.source: FlagSource = self.store

    def write(self, values: Mapping[str, object]) -> None:
        replace_file(self.path, yaml.safe_dump(dict(values)) if values else "")
        self.store.reload()

    def write_broken(self) -> None:
        replace_file(self.path, "rrf_k_constant: [unclosed\n")
        self.store.reload()


class FlagdFileDefinitions:
    """flagd's in-process provider over a flag file, as `serve` wires it: the file is checked, then flagd reads it."""

    def __init__(self, settings: Settings, path: Path) -> None:
        self.path = path
        path.write_text(json.dumps(flagd_definitions({})))
        source = build_flag_source(settings)
        assert isinstance(source, OpenFeatureKnobs)
        self.openfeature = source
        self.source: FlagSource = source

    def write(self, values: Mapping[str, object]) -> None:
        version = self.source.version
        replace_file(self.path, json.dumps(flagd_definitions(values)))
        if self.two_polls():
            assert eventually(lambda: self.source.version != version), "flagd did not pick up the file"

    def write_broken(self) -> None:
        replace_file(self.path, BROKEN_JSON)
        self.two_polls()
        assert self.source.problem() is not None, "the broken file was not reported"

    def two_polls(self) -> bool:
        """Check the file as `run()` does at two polls (a file rewritten in place is judged at the second)."""
        return self.openfeature.check_definitions() or self.openfeature.check_definitions()


class TestFlagsFileSource(FlagSourceContract):
    @pytest.fixture
    def definitions(self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> FlagsFileDefinitions:
        return FlagsFileDefinitions(env_settings(monkeypatch), tmp_path / "flags.yaml")


class TestOpenFeatureFlagdSource(FlagSourceContract):
    @pytest.fixture
    def definitions(self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FlagdFileDefinitions]:
        path = tmp_path / "flags.flagd.json"
        settings = env_settings(
            monkeypatch,
            flags_provider="openfeature",
            flagd_resolver="in-process",
            flagd_offline_flag_source_path=path,
        )
        definitions = FlagdFileDefinitions(settings, path)
        yield definitions
        definitions.source.close()
