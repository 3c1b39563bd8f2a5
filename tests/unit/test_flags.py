from __future__ import annotations

import asyncio
import json
import logging
from typing import TYPE_CHECKING, Any

import pytest
from prometheus_client import REGISTRY

from app.config import Settings
from app.domain.models import SearchStrategy
from app.knobs import KNOB_NAMES, SearchKnobs
from app.observability.metrics import flags_fingerprint
from app.search.flags import FlagsFileError, FlagStore, knobs_from_settings, parse_flags_file

if TYPE_CHECKING:
    from pathlib import Path


def reload_errors() -> float:
    return REGISTRY.get_sample_value("poimen_flags_reload_errors_total") or 0.0


def gauge(name: str) -> float:
    value = REGISTRY.get_sample_value(name)
    assert value is not None
    return value


@pytest.fixture
def settings(monkeypatch: pytest.MonkeyPatch) -> Settings:
    for name in KNOB_NAMES:
        monkeypatch.delenv(name.upper(), raising=False)
    monkeypatch.setenv("RRF_K_CONSTANT", "70")
    monkeypatch.setenv("HYBRID_ROLLOUT_PERCENT", "25")
    return Settings(_env_file=None)


def write(path: Path, text: str) -> Path:
    """Write `text` beside `path` and rename it over `path`, as `mv` and a ConfigMap update do (in place: below)."""
    staging = path.with_name(path.name + ".next")
    staging.write_text(text)
    staging.replace(path)
    return path


def test_without_a_file_the_flags_are_the_env_values_and_defaults(settings: Settings) -> None:
    store = FlagStore(settings, path=None)

    assert store.current().rrf_k_constant == 70
    assert store.current().rrf_final_k == 10
    assert store.sources()["rrf_k_constant"] == "env"
    assert store.sources()["rrf_final_k"] == "default"
    assert store.version == 0


def test_file_values_override_env_and_keys_may_be_env_style(settings: Settings, tmp_path: Path) -> None:
    path = write(tmp_path / "flags.yaml", "RRF_K_CONSTANT: 40\nsearch_strategy: LEXICAL\nHybrid-Rollout-Percent: 50\n")

    store = FlagStore(settings, path=path)

    flags = store.current()
    assert (flags.rrf_k_constant, flags.search_strategy, flags.hybrid_rollout_percent) == (
        40,
        SearchStrategy.LEXICAL,
        50,
    )
    assert store.sources()["rrf_k_constant"] == "file"
    assert store.sources()["semantic_timeout_ms"] == "default"
    assert store.version == 1
    assert gauge("poimen_flags_version") == 1
    assert gauge("poimen_rollout_hybrid_percent") == 50


def test_two_processes_holding_the_same_flags_publish_one_fingerprint_whatever_their_versions(
    settings: Settings, tmp_path: Path
) -> None:
    path = write(tmp_path / "flags.yaml", "rrf_k_constant: 40\n")
    veteran = FlagStore(settings, path=path)
    write(path, "rrf_k_constant: 41\n")
    veteran.reload()
    write(path, "rrf_k_constant: 40\n")
    veteran.reload()
    veteran_print = gauge("poimen_flags_fingerprint")

    newcomer = FlagStore(settings, path=path)  # a pod started after the changes

    assert (veteran.version, newcomer.version) == (3, 1)
    assert gauge("poimen_flags_fingerprint") == veteran_print
    assert flags_fingerprint(veteran.current()) == flags_fingerprint(newcomer.current())
    assert flags_fingerprint(newcomer.current().model_copy(update={"rrf_k_constant": 41})) != veteran_print


def test_a_json_file_is_read(settings: Settings, tmp_path: Path) -> None:
    path = write(tmp_path / "flags.json", json.dumps({"rollout_shadow_enabled": True, "rrf_final_k": 20}))

    store = FlagStore(settings, path=path)

    assert store.current().rollout_shadow_enabled is True
    assert store.current().rrf_final_k == 20


def test_a_json_file_setting_a_key_twice_is_refused(settings: Settings, tmp_path: Path) -> None:
    path = write(tmp_path / "flags.json", '{"rrf_k_constant": 40}')
    store = FlagStore(settings, path=path)

    write(path, '{"HYBRID_ROLLOUT_PERCENT": 0, "HYBRID_ROLLOUT_PERCENT": 50}')

    assert store.reload() is False
    assert store.current().hybrid_rollout_percent == 25  # the env value: the last good flags
    assert store.last_error == "HYBRID_ROLLOUT_PERCENT is set twice, to 0 and to 50: set it once"


def test_a_key_written_twice_with_one_value_is_accepted(settings: Settings, tmp_path: Path) -> None:
    store = FlagStore(settings, path=write(tmp_path / "flags.yaml", "rrf_k_constant: 40\nrrf_k_constant: 40\n"))

    assert store.current().rrf_k_constant == 40
    assert store.last_error is None


def test_an_empty_file_overrides_nothing(settings: Settings, tmp_path: Path) -> None:
    store = FlagStore(settings, path=write(tmp_path / "flags.yaml", "# nothing yet\n"))

    assert store.current() == knobs_from_settings(settings)
    assert store.last_error is None


def test_describe_shows_each_value_and_its_source(settings: Settings, tmp_path: Path) -> None:
    path = write(tmp_path / "flags.yaml", "rrf_final_k: 5\n")

    description = FlagStore(settings, path=path).describe()

    assert description["version"] == 1
    assert description["file"] == str(path)
    assert description["last_error"] is None
    flags = description["flags"]
    assert isinstance(flags, dict)
    assert set(flags) == set(KNOB_NAMES)
    assert flags["rrf_final_k"] == {"value": 5, "source": "file"}
    assert flags["rrf_k_constant"] == {"value": 70, "source": "env"}
    assert flags["search_strategy"] == {"value": "hybrid", "source": "default"}
    json.dumps(description)  # the admin endpoint serves it as is


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("rrf_k_constant: [unclosed\n", "cannot parse"),
        ("- a list\n", "top level must be a mapping"),
        ("rrf_k_constnat: 40\n", "unknown flag 'rrf_k_constnat'"),
        ("rrf_k_constant: 0\n", "RRF_K_CONSTANT"),
        ("search_strategy: telepathy\n", "SEARCH_STRATEGY"),
        ("hybrid_rollout_percent: on\n", "HYBRID_ROLLOUT_PERCENT: Value error, a boolean (true) is not a number"),
        # Only commas: it routed no query, while a blank value is the env's (or the default's) routing.
        ("query_routing_strategies: ','\n", "QUERY_ROUTING_STRATEGIES: Value error, names no strategy"),
        # PyYAML keeps the last of two equal keys: a rollback line added above an old one did nothing.
        (
            "hybrid_rollout_percent: 0\nrrf_k_constant: 45\nhybrid_rollout_percent: 50\n",
            "hybrid_rollout_percent is set twice, to 0 and to 50 (line 3): set it once",
        ),
    ],
)
def test_a_bad_file_keeps_the_last_good_flags_and_says_why(
    settings: Settings, tmp_path: Path, caplog: pytest.LogCaptureFixture, content: str, reason: str
) -> None:
    path = write(tmp_path / "flags.yaml", "rrf_k_constant: 40\n")
    store = FlagStore(settings, path=path)
    errors_before = reload_errors()
    write(path, content)

    with caplog.at_level(logging.WARNING, logger="app.search.flags"):
        changed = store.reload()

    assert changed is False
    assert store.current().rrf_k_constant == 40
    assert store.version == 1
    assert store.last_error is not None
    assert reason in store.last_error
    assert reload_errors() == errors_before + 1
    (record,) = caplog.records
    assert reason in record.getMessage()
    assert "\n" not in record.getMessage()


def test_a_bad_file_is_reported_once_not_on_every_poll(settings: Settings, tmp_path: Path) -> None:
    path = write(tmp_path / "flags.yaml", "rrf_k_constant: nope\n")
    store = FlagStore(settings, path=path)
    errors_after_start = reload_errors()

    store.reload()
    store.reload()

    assert reload_errors() == errors_after_start
    assert store.current().rrf_k_constant == 70  # the env value: the last good flags at start


def test_fixing_a_bad_file_applies_it_and_clears_the_error(settings: Settings, tmp_path: Path) -> None:
    path = write(tmp_path / "flags.yaml", "rrf_k_constant: nope\n")
    store = FlagStore(settings, path=path)

    write(path, "rrf_k_constant: 80\n")
    changed = store.reload()

    assert changed is True
    assert store.current().rrf_k_constant == 80
    assert store.last_error is None


def test_a_missing_file_keeps_the_env_flags(settings: Settings, tmp_path: Path) -> None:
    store = FlagStore(settings, path=tmp_path / "absent.yaml")

    assert store.current() == knobs_from_settings(settings)
    assert store.last_error is not None
    assert "cannot read" in store.last_error


def test_rewriting_the_same_values_does_not_bump_the_version(settings: Settings, tmp_path: Path) -> None:
    path = write(tmp_path / "flags.yaml", "rrf_k_constant: 40\n")
    store = FlagStore(settings, path=path)

    write(path, "# reformatted\nRRF_K_CONSTANT: 40\n")

    assert store.reload() is False
    assert store.version == 1


def test_an_edit_in_place_caught_half_written_is_not_applied(settings: Settings, tmp_path: Path) -> None:
    # Rewritten in place (`cat > flags.yaml`, an editor saving in place), a poll between the truncation and
    # the write read an empty file and applied it: the env's HYBRID_ROLLOUT_PERCENT (25) for a poll.
    path = write(tmp_path / "flags.yaml", "hybrid_rollout_percent: 10\n")
    store = FlagStore(settings, path=path)

    path.write_text("")
    store.reload()
    while_truncated = store.current().hybrid_rollout_percent
    path.write_text("hybrid_rollout_percent: 20\n")
    store.reload()
    store.reload()

    assert while_truncated == 10
    assert store.current().hybrid_rollout_percent == 20
    assert store.version == 2  # 10, then 20: never the env's 25 in between


def test_a_file_renamed_into_place_applies_at_the_first_poll(settings: Settings, tmp_path: Path) -> None:
    path = write(tmp_path / "flags.yaml", "hybrid_rollout_percent: 10\n")
    store = FlagStore(settings, path=path)

    write(tmp_path / "next.yaml", "hybrid_rollout_percent: 20\n").replace(path)
    changed = store.reload()

    assert changed is True
    assert store.current().hybrid_rollout_percent == 20


class PollCountingFlagStore(FlagStore):
    """A store that counts its polls and notes which poll applied each change."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.polls = 0
        self.finished_polls = 0
        self.changes: list[tuple[int, int]] = []  # (poll, the hybrid percent it applied)
        super().__init__(*args, **kwargs)

    def reload(self) -> bool:
        self.polls += 1  # counted as the poll starts: one in flight counts already
        poll = self.polls
        changed = super().reload()
        if changed:
            self.changes.append((poll, self.current().hybrid_rollout_percent))
        self.finished_polls += 1
        return changed

    def poll_that_applied(self, percent: int) -> int | None:
        return next((poll for poll, applied in self.changes if applied == percent), None)


async def test_run_sees_a_rewrite_within_two_polls(settings: Settings, tmp_path: Path) -> None:
    path = write(tmp_path / "flags.yaml", "hybrid_rollout_percent: 10\n")
    store = PollCountingFlagStore(settings, path=path, poll_interval_s=0.2)
    construction_polls = store.polls
    poller = asyncio.create_task(store.run())
    # Written just after a poll of `run()` finished, so that (but on a stalled machine) none is in flight.
    while store.finished_polls == construction_polls and not poller.done():
        await asyncio.sleep(0.01)

    write(path, "hybrid_rollout_percent: 90\n")  # same size: only the content tells it apart
    # Counted after the write: every later poll starts after it. The one in flight may have read before it.
    polls_at_write = store.polls
    # Bounded by polls, not by time: a store that never applies the change fails after ten of them.
    while store.poll_that_applied(90) is None and store.polls < polls_at_write + 10 and not poller.done():
        await asyncio.sleep(0.01)
    poller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await poller

    assert store.current().hybrid_rollout_percent == 90
    applied_at = store.poll_that_applied(90)
    assert applied_at is not None
    assert applied_at <= polls_at_write + 1  # the poll in flight at the write, else the next one
    assert gauge("poimen_rollout_hybrid_percent") == 90


class FailingOnceFlagStore(FlagStore):
    """A store whose first poll fails as nothing in `reload` expects (a disk error, a bug)."""

    failed = False

    def reload(self) -> bool:
        if not self.failed and self.version > 0:
            self.failed = True
            message = "disk on fire"
            raise RuntimeError(message)
        return super().reload()


async def test_run_survives_a_reload_that_fails_unexpectedly(settings: Settings, tmp_path: Path) -> None:
    path = write(tmp_path / "flags.yaml", "hybrid_rollout_percent: 10\n")
    store = FailingOnceFlagStore(settings, path=path, poll_interval_s=0.05)
    errors = reload_errors()
    poller = asyncio.create_task(store.run())
    for _ in range(200):
        if store.failed:
            break
        await asyncio.sleep(0.01)

    write(path, "hybrid_rollout_percent: 90\n")
    for _ in range(200):
        if store.current().hybrid_rollout_percent == 90 or poller.done():
            break
        await asyncio.sleep(0.01)
    alive = not poller.done()
    poller.cancel()
    await asyncio.gather(poller, return_exceptions=True)

    assert alive
    assert store.current().hybrid_rollout_percent == 90
    assert reload_errors() == errors + 1


def test_a_file_nested_too_deeply_is_refused_not_raised(settings: Settings, tmp_path: Path) -> None:
    # A RecursionError escaped the parser: at start it stopped the process with a traceback, on a
    # reload it ended the poller for good.
    path = write(tmp_path / "flags.yaml", "rrf_k_constant: " + "[" * 5000 + "]" * 5000 + "\n")

    store = FlagStore(settings, path=path)

    assert store.current().rrf_k_constant == 70
    assert store.last_error == "cannot parse: nested too deeply"


async def test_run_returns_at_once_without_a_file(settings: Settings) -> None:
    await asyncio.wait_for(FlagStore(settings, path=None).run(), timeout=1.0)


def make_configmap_version(mount: Path, name: str, content: str) -> None:
    version_dir = mount / name
    version_dir.mkdir()
    (version_dir / "flags.yaml").write_text(content)


def swap_configmap_data(mount: Path, name: str) -> None:
    # What the kubelet does: build a new ..data symlink aside, then rename it over the old one (atomic).
    (mount / "..data_tmp").symlink_to(name)
    (mount / "..data_tmp").replace(mount / "..data")


def test_a_configmap_symlink_swap_is_seen(settings: Settings, tmp_path: Path) -> None:
    mount = tmp_path / "config"
    mount.mkdir()
    make_configmap_version(mount, "..2024_01_01_00_00_00.1", "rrf_final_k: 11\n")
    (mount / "..data").symlink_to("..2024_01_01_00_00_00.1")
    (mount / "flags.yaml").symlink_to("..data/flags.yaml")
    store = FlagStore(settings, path=mount / "flags.yaml")

    make_configmap_version(mount, "..2024_01_01_00_01_00.2", "rrf_final_k: 12\n")
    swap_configmap_data(mount, "..2024_01_01_00_01_00.2")
    changed = store.reload()

    assert changed is True
    assert store.current().rrf_final_k == 12


def test_a_knob_set_under_two_spellings_that_disagree_names_both() -> None:
    # The message named one key and "another spelling"; at start-up the same clash names both variables.
    with pytest.raises(FlagsFileError) as refused:
        parse_flags_file(b"FINAL_RESULT_K: 7\nRRF_FINAL_K: 9\n", base=SearchKnobs())

    assert "FINAL_RESULT_K=7 and RRF_FINAL_K=9 disagree (both set rrf_final_k)" in str(refused.value)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param(b"rrf_k_constnat: 40\n", "unknown flag 'rrf_k_constnat': did you mean rrf_k_constant?", id="swap"),
        pytest.param(b"HYBRID_ROLOUT_PERCENT: 5\n", "did you mean HYBRID_ROLLOUT_PERCENT?", id="upper-case-as-written"),
        pytest.param(b"final-result-kk: 5\n", "did you mean final_result_k?", id="a-reference-alias"),
    ],
)
def test_an_unknown_flag_spelt_almost_like_a_knob_names_it(content: bytes, message: str) -> None:
    with pytest.raises(FlagsFileError) as refused:
        parse_flags_file(content, base=SearchKnobs())

    assert message in str(refused.value)


def test_an_unknown_flag_like_no_knob_suggests_none() -> None:
    with pytest.raises(FlagsFileError) as refused:
        parse_flags_file(b"colour: blue\n", base=SearchKnobs())

    assert str(refused.value) == "unknown flag 'colour'"


@pytest.mark.parametrize("blank", ["", "   "], ids=["empty", "blank"])
@pytest.mark.parametrize("name", KNOB_NAMES)
def test_every_knob_blank_in_the_flags_file_is_not_set(settings: Settings, name: str, blank: str) -> None:
    # As an empty variable is (`app/config.py` `BlankIsUnset`); enumerated, so a new knob cannot miss the rule.
    # Before, `query_routing_strategies: ""` routed no query and any other blank knob refused the whole file.
    env_knobs = knobs_from_settings(settings)

    flags, file_keys = parse_flags_file(json.dumps({name.upper(): blank}).encode(), base=env_knobs)

    assert (flags, file_keys) == (env_knobs, frozenset())


def test_a_blank_alias_does_not_disagree_with_its_knob(settings: Settings) -> None:
    flags, file_keys = parse_flags_file(b"FINAL_RESULT_K: ''\nRRF_FINAL_K: 7\n", base=knobs_from_settings(settings))

    assert (flags.rrf_final_k, file_keys) == (7, frozenset({"rrf_final_k"}))
