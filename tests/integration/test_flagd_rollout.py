"""Rollout driven by OpenFeature: a flagd flag file, the in-process provider, and the real search service.

Each test builds services as `app/wiring` does (`SearchService.over`) on the in-memory engines; two
services over one file are two replicas. Nothing is mocked: flagd's own evaluator (murmur3 fractional
buckets, JSON-logic targeting) decides.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import socket
from typing import TYPE_CHECKING

import pytest
from openfeature import api
from openfeature.hook import Hook
from prometheus_client import REGISTRY

from app.config import Settings
from app.domain.models import SearchStrategy
from app.engines.memory import InMemoryDocumentStore
from app.engines.memory_lexical import InMemoryLexicalIndex
from app.engines.memory_vectors import InMemoryVectorIndex
from app.engines.openfeature_flags import OpenFeatureKnobs
from app.engines.openfeature_provider import build_provider
from app.knobs import KNOB_NAMES
from app.query.planner import SearchOptions
from app.search.calls import ARM_BY_FLAGS, SearchCall
from app.search.service import SearchService
from tests.contract.flag_source import eventually

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from pathlib import Path

    from openfeature.hook import HookContext, HookHints

CALLERS = 10_000
DIMENSIONS = 16


class WordHashEmbedder:
    """Hashes words into a few buckets: enough for the engines to run, no model needed."""

    name = "word-hash"
    model_name = "word-hash-16"
    dimensions = DIMENSIONS

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return [self._vector(text) for text in texts]

    async def embed_query(self, text: str, *, scope: str = "") -> list[float]:
        return self._vector(text)

    @staticmethod
    def _vector(text: str) -> list[float]:
        vector = [0.0] * DIMENSIONS
        for word in text.lower().split():
            vector[hashlib.sha256(word.encode()).digest()[0] % DIMENSIONS] += 1.0
        norm = math.sqrt(sum(value * value for value in vector)) or 1.0
        return [value / norm for value in vector]


def flag_file(*, hybrid_percent: int, pinned_project: str = "pinned") -> dict[str, object]:
    """`hybrid-rollout-percent` split 100/0 by flagd `fractional`; `search-strategy` pins one project to lexical."""
    return {
        "$schema": "https://flagd.dev/schema/v0/flags.json",
        "flags": {
            "hybrid-rollout-percent": {
                "state": "ENABLED",
                "variants": {"hybrid": 100, "semantic": 0},
                "defaultVariant": "semantic",
                "targeting": {"fractional": [["hybrid", hybrid_percent], ["semantic", 100 - hybrid_percent]]},
            },
            "search-strategy": {
                "state": "ENABLED",
                "variants": {"lexical": "lexical", "hybrid": "hybrid"},
                "defaultVariant": "hybrid",
                "targeting": {"if": [{"==": [{"var": "project"}, pinned_project]}, "lexical", None]},
            },
            "query-optimization-enabled": {
                "state": "ENABLED",
                "variants": {"on": True, "off": False},
                "defaultVariant": "off",
            },
        },
    }


def write_flags(path: Path, definitions: dict[str, object]) -> None:
    staging = path.with_suffix(".next")
    staging.write_text(json.dumps(definitions))
    staging.replace(path)


def call(caller: str, project: str = "alpha") -> SearchCall:
    return SearchCall(
        query="quarterly revenue report", options=SearchOptions(project=project), auth_scope="t", caller_key=caller
    )


def free_port() -> int:
    """A loopback port nothing listens on (bound, read, released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def reload_errors() -> float:
    return REGISTRY.get_sample_value("poimen_flags_reload_errors_total") or 0.0


class Replicas:
    """Services built independently over one flag file, each with its own provider: replicas of one app."""

    def __init__(self, settings: Settings, count: int) -> None:
        self.sources = [OpenFeatureKnobs(settings, provider=build_provider(settings)) for _ in range(count)]
        self.services = [self._service(source) for source in self.sources]

    @staticmethod
    def _service(source: OpenFeatureKnobs) -> SearchService:
        store = InMemoryDocumentStore()
        return SearchService.over(
            vector=InMemoryVectorIndex(store),
            lexical=InMemoryLexicalIndex(),
            embedder=WordHashEmbedder(),
            store=store,
            knobs=source,
        )

    def arms(self, index: int, callers: Sequence[str]) -> list[str]:
        return [self.services[index].rollout_arm(call(caller))[0] for caller in callers]

    def close(self) -> None:
        for source in self.sources:
            source.close()


@pytest.fixture
def flags_path(tmp_path: Path) -> Path:
    path = tmp_path / "flags.flagd.json"
    write_flags(path, flag_file(hybrid_percent=10))
    return path


@pytest.fixture
def replicas(flags_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Replicas]:
    for name in KNOB_NAMES:
        monkeypatch.delenv(name.upper(), raising=False)
    settings = Settings(
        _env_file=None,
        flags_provider="openfeature",
        flagd_resolver="in-process",
        flagd_offline_flag_source_path=flags_path,
    )
    built = Replicas(settings, count=2)
    yield built
    built.close()


CALLER_KEYS = [f"sub:user-{number}" for number in range(CALLERS)]


def test_ten_percent_fractional_rollout_gives_about_a_tenth_of_callers_the_hybrid_arm(replicas: Replicas) -> None:
    arms = replicas.arms(0, CALLER_KEYS)

    hybrid_share = arms.count("hybrid") / CALLERS
    assert 0.09 <= hybrid_share <= 0.11  # binomial sd at n=10,000 is 0.3 points: +-1 point is > 3 sd
    assert set(arms) == {"hybrid", "semantic"}


def test_each_caller_gets_the_same_arm_on_every_call_and_every_replica(replicas: Replicas) -> None:
    first = replicas.arms(0, CALLER_KEYS)

    again = replicas.arms(0, CALLER_KEYS)
    other_replica = replicas.arms(1, CALLER_KEYS)

    assert again == first
    assert other_replica == first


async def test_the_search_reports_the_arm_flagd_decided(replicas: Replicas) -> None:
    hybrid_caller = next(key for key in CALLER_KEYS if replicas.arms(0, [key]) == ["hybrid"])
    semantic_caller = next(key for key in CALLER_KEYS if replicas.arms(0, [key]) == ["semantic"])

    served_hybrid = await replicas.services[0].search(call(hybrid_caller))
    served_semantic = await replicas.services[1].search(call(semantic_caller))

    assert (served_hybrid.arm, served_hybrid.arm_decided_by) == ("hybrid", ARM_BY_FLAGS)
    assert (served_semantic.arm, served_semantic.arm_decided_by) == ("semantic", ARM_BY_FLAGS)
    assert served_semantic.plan.strategy is SearchStrategy.SEMANTIC


async def test_a_targeting_rule_pins_one_project_to_its_strategy(replicas: Replicas) -> None:
    hybrid_caller = next(key for key in CALLER_KEYS if replicas.arms(0, [key]) == ["hybrid"])

    pinned = await replicas.services[0].search(call(hybrid_caller, project="pinned"))
    other = await replicas.services[0].search(call(hybrid_caller, project="alpha"))

    assert pinned.plan.strategy is SearchStrategy.LEXICAL
    assert other.plan.strategy is SearchStrategy.HYBRID


def test_editing_the_flag_file_changes_the_split_without_a_restart(replicas: Replicas, flags_path: Path) -> None:
    version = replicas.sources[0].version

    write_flags(flags_path, flag_file(hybrid_percent=50))

    assert eventually(lambda: all(source.version != version for source in replicas.sources))
    hybrid_share = replicas.arms(0, CALLER_KEYS[:2000]).count("hybrid") / 2000
    assert 0.45 <= hybrid_share <= 0.55
    assert replicas.arms(1, CALLER_KEYS[:2000]) == replicas.arms(0, CALLER_KEYS[:2000])


def test_a_broken_flag_file_keeps_the_last_good_split_and_counts_an_error(replicas: Replicas, flags_path: Path) -> None:
    before = replicas.arms(0, CALLER_KEYS[:1000])
    errors = reload_errors()

    flags_path.write_text('{"flags": {"hybrid-rollout-percent": ')

    assert eventually(lambda: all(source.problem() is not None for source in replicas.sources))
    assert replicas.arms(0, CALLER_KEYS[:1000]) == before
    assert reload_errors() == errors + 2  # once per replica, not once per poll


class EvaluationCounter(Hook):
    """Counts the flag evaluations OpenFeature clients start: a hook on the SDK's global API."""

    def __init__(self) -> None:
        self.started = 0

    def before(self, hook_context: HookContext, hints: HookHints) -> None:
        self.started += 1


@pytest.fixture
def evaluations() -> Iterator[EvaluationCounter]:
    counter = EvaluationCounter()
    previous = list(api.get_hooks())
    api.add_hooks([counter])
    yield counter
    api.clear_hooks()
    api.add_hooks(previous)


async def test_an_unreachable_flagd_sidecar_never_delays_or_breaks_search(
    monkeypatch: pytest.MonkeyPatch, evaluations: EvaluationCounter
) -> None:
    for name in KNOB_NAMES:
        monkeypatch.delenv(name.upper(), raising=False)
    settings = Settings(
        _env_file=None,
        flags_provider="openfeature",
        flagd_resolver="rpc",
        flagd_port=free_port(),
        flags_provider_wait_s=1.0,
        rrf_final_k=4,
    )
    errors = reload_errors()
    replica = Replicas(settings, count=1)
    evaluations_before_search = evaluations.started

    outcome = await replica.services[0].search(call("sub:someone"))
    replica.close()

    # Counted, not timed: each evaluation the provider is asked for waits out flagd's deadline (500 ms) on an
    # unreachable sidecar, so the search must ask it for none.
    assert evaluations.started == evaluations_before_search
    assert outcome.plan.limit == 4  # the env knob
    assert replica.sources[0].problem() is not None
    assert reload_errors() > errors


def test_knobs_for_no_caller_log_no_flagd_error_about_the_missing_targeting_key(
    replicas: Replicas, caplog: pytest.LogCaptureFixture
) -> None:
    source = replicas.sources[0]

    with caplog.at_level(logging.ERROR, logger="openfeature.contrib"):
        knobs = source.current()
        source.describe()

    assert knobs.hybrid_rollout_percent == 0  # the split's default variant, as before
    assert [record.getMessage() for record in caplog.records if record.name == "openfeature.contrib"] == []


def test_a_caller_without_a_targeting_key_still_gets_flagds_error(
    replicas: Replicas, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="openfeature.contrib"):
        replicas.arms(0, [""])

    assert "No hashKey value resolved" in [record.getMessage() for record in caplog.records]
