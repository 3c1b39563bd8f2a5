"""A flagd flag file edited while `serve` runs: as `serve` wires it, the file checked, then flagd's in-process provider.

Nothing is mocked: flagd's own file watcher, evaluator and fractional buckets decide. What is checked is what
an operator rolling a change out sees: a refused file leaves every caller's split as it was and is said once;
every way of replacing the file (rename, in place, delete and recreate, a ConfigMap's `..data` swap, a file
older than the one it replaces) is applied without a restart.
"""

from __future__ import annotations

import copy
import json
import logging
import os
from typing import TYPE_CHECKING, Any

import pytest
import yaml
from prometheus_client import REGISTRY

from app.config import Settings
from app.engines.openfeature_flags import OpenFeatureKnobs
from app.knobs import KNOB_NAMES
from app.search.knob_source import FlagContext
from app.wiring.services import build_flag_source
from tests.contract.flag_source import eventually

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

PROJECTS = [f"project-{number}" for number in range(400)]


def definitions(*, rrf_percent: int, strategy: str = "hybrid") -> dict[str, Any]:
    """`ranking-algorithm` split by project (`rrf_percent` % of projects on RRF), `search-strategy` static."""
    return {
        "$schema": "https://flagd.dev/schema/v0/flags.json",
        "flags": {
            "ranking-algorithm": {
                "state": "ENABLED",
                "variants": {"rrf": "rrf", "zscore": "zscore"},
                "defaultVariant": "zscore",
                "targeting": {
                    "fractional": [
                        {"cat": [{"var": "$flagd.flagKey"}, {"var": "project"}]},
                        ["rrf", rrf_percent],
                        ["zscore", 100 - rrf_percent],
                    ]
                },
            },
            "search-strategy": {
                "state": "ENABLED",
                "variants": {"hybrid": "hybrid", "lexical": "lexical", "semantic": "semantic"},
                "defaultVariant": strategy,
            },
        },
    }


def rename_into_place(path: Path, content: str, *, mtime_s: float | None = None) -> None:
    staging = path.with_name(path.name + ".next")
    staging.write_text(content)
    if mtime_s is not None:
        os.utime(staging, (mtime_s, mtime_s))
    staging.replace(path)


def reload_errors() -> float:
    return REGISTRY.get_sample_value("poimen_flags_reload_errors_total") or 0.0


class Served:
    """One replica's flag source over the operator's file, polled by hand as `run()` polls it."""

    def __init__(self, settings: Settings, path: Path) -> None:
        self.path = path
        source = build_flag_source(settings)
        assert isinstance(source, OpenFeatureKnobs)
        self.source = source

    def poll(self, times: int = 2) -> None:
        version = self.source.version
        if [self.source.check_definitions() for _ in range(times)].count(True):
            assert eventually(lambda: self.source.version != version), "flagd did not pick up the checked copy"

    def fusions(self) -> list[str]:
        return [
            self.source.resolve(FlagContext(targeting_key=f"sub:{project}", project=project)).knobs.ranking_algorithm
            for project in PROJECTS
        ]

    def strategy(self) -> str:
        return self.source.resolve(FlagContext(targeting_key="sub:x", project="p")).knobs.search_strategy.value


def flags_settings(path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    for name in KNOB_NAMES:
        monkeypatch.delenv(name.upper(), raising=False)
    return Settings(
        _env_file=None, flags_provider="openfeature", flagd_resolver="in-process", flagd_offline_flag_source_path=path
    )


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Served]:
    path = tmp_path / "flags.flagd.json"
    rename_into_place(path, json.dumps(definitions(rrf_percent=10)))
    replica = Served(flags_settings(path, monkeypatch), path)
    yield replica
    replica.source.close()


def test_a_tenth_of_projects_get_the_new_fusion_the_same_on_every_replica(
    served: Served, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = Served(flags_settings(served.path, monkeypatch), served.path)

    first = served.fusions()
    again = served.fusions()
    on_other_replica = other.fusions()
    other.source.close()

    assert 0.06 <= first.count("rrf") / len(PROJECTS) <= 0.14  # binomial sd at n=400 is 1.5 points
    assert again == first
    assert on_other_replica == first


@pytest.mark.parametrize(
    "refused",
    [
        {"flag": definitions(rrf_percent=50)["flags"]},  # a misspelt top-level key: flagd dropped every flag
        {
            "flags": {
                "ranking-algorithm": {
                    **definitions(rrf_percent=50)["flags"]["ranking-algorithm"],
                    "targeting": {"fractional": [["rrf", 50], ["zcore", 50]]},
                }
            }
        },
        {"flags": {"search-strategy": {"state": "ENABLED", "variants": {"a": "turbo"}, "defaultVariant": "a"}}},
    ],
    ids=["flags-key-misspelt", "fractional-unknown-variant", "unknown-strategy"],
)
def test_a_refused_file_keeps_every_projects_split_and_is_said_once(
    served: Served, refused: dict[str, object], caplog: pytest.LogCaptureFixture
) -> None:
    before = served.fusions()
    errors = reload_errors()

    with caplog.at_level(logging.WARNING):
        rename_into_place(served.path, json.dumps(refused))
        served.poll(times=5)

    assert served.fusions() == before
    assert served.strategy() == "hybrid"
    assert reload_errors() == errors + 1
    assert served.source.problem() is not None
    warnings = [record for record in caplog.records if record.levelno >= logging.WARNING]
    assert len(warnings) == 1, [record.getMessage() for record in warnings]


def test_a_broken_file_is_not_logged_again_on_every_flagd_poll(
    served: Served, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        rename_into_place(served.path, '{"flags": {"search-strategy": ')
        served.poll()
        eventually(lambda: False, timeout_s=1.5)  # three of flagd's 0.5 s polls

    assert [record.name for record in caplog.records if record.levelno >= logging.WARNING] == [
        "app.engines.flagd_definitions"
    ]


def test_a_file_renamed_into_place_with_an_older_mtime_is_applied(served: Served) -> None:
    older_s = served.path.stat().st_mtime - 600

    rename_into_place(served.path, json.dumps(definitions(rrf_percent=10, strategy="lexical")), mtime_s=older_s)
    served.poll()

    assert served.strategy() == "lexical"


def test_an_edit_in_place_is_applied_and_a_half_written_one_is_not_reported(served: Served) -> None:
    complete = json.dumps(definitions(rrf_percent=10, strategy="semantic"))
    errors = reload_errors()

    served.path.write_text(complete[: len(complete) // 2])
    served.source.check_definitions()
    served.path.write_text(complete)
    served.poll()

    assert served.strategy() == "semantic"
    assert reload_errors() == errors
    assert served.source.problem() is None


def test_a_deleted_file_keeps_the_last_good_flags_until_it_is_recreated(served: Served) -> None:
    before = served.fusions()
    errors = reload_errors()

    served.path.unlink()
    served.poll(times=5)
    while_deleted = (served.fusions(), served.strategy(), served.source.problem())
    served.path.write_text(json.dumps(definitions(rrf_percent=10, strategy="lexical")))
    served.poll()

    assert while_deleted[:2] == (before, "hybrid")
    assert "cannot read" in (while_deleted[2] or "")
    assert reload_errors() == errors + 1
    assert served.strategy() == "lexical"
    assert served.source.problem() is None


def test_a_configmap_data_symlink_swap_is_applied(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mount = tmp_path / "mount"
    first, second = mount / "..2026_01_01", mount / "..2026_01_02"
    first.mkdir(parents=True)
    second.mkdir()
    (first / "flags.flagd.json").write_text(json.dumps(definitions(rrf_percent=10, strategy="hybrid")))
    (second / "flags.flagd.json").write_text(json.dumps(definitions(rrf_percent=10, strategy="lexical")))
    os.utime(second / "flags.flagd.json", (1, 1))  # written long before: only the content says it changed
    (mount / "..data").symlink_to(first.name)
    (mount / "flags.flagd.json").symlink_to("..data/flags.flagd.json")
    replica = Served(flags_settings(mount / "flags.flagd.json", monkeypatch), mount / "flags.flagd.json")
    before = replica.strategy()

    (mount / "..data_tmp").symlink_to(second.name)
    (mount / "..data_tmp").replace(mount / "..data")
    replica.poll()
    after = replica.strategy()
    replica.source.close()

    assert (before, after) == ("hybrid", "lexical")


def test_a_process_started_on_a_refused_file_runs_on_the_env_knobs_until_it_is_fixed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "flags.flagd.json"
    rename_into_place(path, json.dumps({"flag": definitions(rrf_percent=10, strategy="lexical")["flags"]}))
    errors = reload_errors()
    replica = Served(flags_settings(path, monkeypatch), path)
    at_start = (replica.strategy(), replica.source.problem())

    rename_into_place(path, json.dumps(definitions(rrf_percent=10, strategy="lexical")))
    replica.poll()
    fixed = (replica.strategy(), replica.source.problem())
    replica.source.close()

    assert at_start[0] == "hybrid"  # the env default
    assert '"flags" mapping' in (at_start[1] or "")
    assert reload_errors() == errors + 1
    assert fixed == ("lexical", None)


def test_a_disabled_flag_leaves_its_knob_to_the_env_value(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Turning a flag off answered its last value forever (9), /admin/flags naming `openfeature` its source.
    path = tmp_path / "flags.flagd.json"
    enabled = definitions(rrf_percent=10, strategy="lexical")
    rename_into_place(path, json.dumps(enabled))
    replica = Served(flags_settings(path, monkeypatch), path)
    before = replica.strategy()

    disabled = copy.deepcopy(enabled)
    disabled["flags"]["search-strategy"]["state"] = "DISABLED"
    rename_into_place(path, json.dumps(disabled))
    replica.poll()
    after = replica.strategy()
    described: Any = replica.source.describe()["flags"]
    source = described["search_strategy"]["source"]
    replica.source.close()

    assert (before, after) == ("lexical", "hybrid")
    assert source == "default"


def test_a_yaml_file_read_cut_at_a_line_while_rewritten_in_place_is_not_applied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # JSON cut short never parses; YAML cut at a line does: here without its search-strategy flag (env: hybrid).
    path = tmp_path / "flags.flagd.yaml"
    rename_into_place(path, yaml.safe_dump(definitions(rrf_percent=10, strategy="lexical"), sort_keys=False))
    replica = Served(flags_settings(path, monkeypatch), path)
    semantic = yaml.safe_dump(definitions(rrf_percent=10, strategy="semantic"), sort_keys=False)

    path.write_text(semantic[: semantic.index("  search-strategy:")])
    replica.source.check_definitions()
    eventually(lambda: False, timeout_s=1.0)  # two of flagd's polls, had it been handed the cut file
    while_cut = replica.strategy()
    path.write_text(semantic)
    replica.poll()
    after = replica.strategy()
    replica.source.close()

    assert (while_cut, after) == ("lexical", "semantic")
