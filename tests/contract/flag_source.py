"""The `FlagSource` contract: every flag source (flags file, OpenFeature/flagd) passes these tests.

A test writes knob values through the source's own definition format (`FlagDefinitions.write`), then
asks the source what it resolves. Not collected by itself (no `Test` prefix).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Protocol

import pytest
from annotated_types import Ge
from prometheus_client import REGISTRY

from app.domain.models import SearchStrategy
from app.knobs import KNOB_NAMES, SearchKnobs
from app.search.knob_source import FLAG_KINDS, FlagContext

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from app.search.knob_source import FlagSource

ENV_RRF_K = 70
ENV_ROUTING_STRATEGIES = "hybrid,lexical"
STRING_KNOBS = tuple(name for name, kind in FLAG_KINDS.items() if kind == "string")
OTHER_STRING_VALUES = {"search_strategy": "lexical", "ranking_algorithm": "rrf", "query_routing_strategies": "semantic"}
"""A valid value other than the env's for every knob whose flag is a string: a new one needs its entry here."""
OTHER_WEIGHTS = {"hybrid_semantic_weight": 0.6, "hybrid_lexical_weight": 0.4}
"""Not both at their lower bound: both weights 0 is refused."""


def other_value(name: str) -> object:
    """A valid value of knob `name` other than its default, of its flag's type; each one alone, or all together."""
    field = SearchKnobs.model_fields[name]
    kind = FLAG_KINDS[name]
    if kind == "string":
        return OTHER_STRING_VALUES[name]
    if kind == "boolean":
        return not field.default
    if name in OTHER_WEIGHTS:
        return OTHER_WEIGHTS[name]
    lowest = next(constraint.ge for constraint in field.metadata if isinstance(constraint, Ge))
    value = lowest + 1 if lowest == field.default else lowest
    return float(value) if kind == "float" else int(value)


CALLER = FlagContext(targeting_key="sub:alice", project="alpha", scopes=("search",))
OTHER_CALLER = FlagContext(targeting_key="client:bot-7", project="beta")


def reload_errors() -> float:
    return REGISTRY.get_sample_value("poimen_flags_reload_errors_total") or 0.0


def eventually(condition: Callable[[], bool], *, timeout_s: float = 5.0) -> bool:
    """Poll `condition` until it holds or `timeout_s` passes; sources that watch files on a thread need it."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


class FlagDefinitions(Protocol):
    """A source and the file it reads, written in that source's own format."""

    source: FlagSource

    def write(self, values: Mapping[str, object]) -> None:
        """Replace the definitions with these knob values (knob names), and wait until the source saw them."""
        ...

    def write_broken(self) -> None:
        """Replace the definitions with a file that does not parse, and wait until the source saw it."""
        ...


class FlagSourceContract:
    @pytest.fixture
    def definitions(self) -> FlagDefinitions:
        raise NotImplementedError

    def test_knobs_without_a_flag_keep_their_env_values(self, definitions: FlagDefinitions) -> None:
        definitions.write({})

        knobs = definitions.source.resolve(CALLER).knobs

        assert knobs.rrf_k_constant == ENV_RRF_K
        assert knobs.search_strategy is SearchStrategy.HYBRID

    def test_a_flag_sets_its_knob_for_every_caller(self, definitions: FlagDefinitions) -> None:
        definitions.write({"search_strategy": "lexical", "rrf_k_constant": 9, "query_optimization_enabled": False})

        first = definitions.source.resolve(CALLER).knobs
        second = definitions.source.resolve(OTHER_CALLER).knobs

        assert (first.search_strategy, first.rrf_k_constant, first.query_optimization_enabled) == (
            SearchStrategy.LEXICAL,
            9,
            False,
        )
        assert second == first
        assert definitions.source.current() == first

    def test_float_and_reference_spelled_values_mean_what_the_env_knob_means(
        self, definitions: FlagDefinitions
    ) -> None:
        definitions.write({"hybrid_lexical_weight": 0.8, "ranking_algorithm": "weighted_linear"})

        knobs = definitions.source.resolve(CALLER).knobs

        assert knobs.leg_weights() == pytest.approx((0.2, 0.8))
        assert knobs.ranking_algorithm.value == "weighted"

    def test_editing_the_definitions_changes_the_knobs_and_the_version_without_restart(
        self, definitions: FlagDefinitions
    ) -> None:
        definitions.write({"rrf_k_constant": 9})
        before = definitions.source.resolve(CALLER)

        definitions.write({"rrf_k_constant": 11})
        after = definitions.source.resolve(CALLER)

        assert (before.knobs.rrf_k_constant, after.knobs.rrf_k_constant) == (9, 11)
        assert after.version != before.version
        assert after.version == definitions.source.version

    def test_broken_definitions_keep_the_last_good_values_and_count_an_error(
        self, definitions: FlagDefinitions
    ) -> None:
        definitions.write({"rrf_k_constant": 9, "search_strategy": "semantic"})
        errors = reload_errors()

        definitions.write_broken()
        knobs = definitions.source.resolve(CALLER).knobs

        assert (knobs.rrf_k_constant, knobs.search_strategy) == (9, SearchStrategy.SEMANTIC)
        assert reload_errors() == errors + 1
        assert definitions.source.problem() is not None

    def test_good_definitions_after_broken_ones_clear_the_problem(self, definitions: FlagDefinitions) -> None:
        definitions.write_broken()

        definitions.write({"rrf_k_constant": 12})

        assert definitions.source.resolve(CALLER).knobs.rrf_k_constant == 12
        assert definitions.source.problem() is None

    def test_an_invalid_value_never_reaches_a_search_and_counts_an_error(self, definitions: FlagDefinitions) -> None:
        errors = reload_errors()

        definitions.write({"rrf_k_constant": 0})
        knobs = definitions.source.resolve(CALLER).knobs

        assert knobs.rrf_k_constant == ENV_RRF_K
        assert reload_errors() == errors + 1

    def test_an_out_of_range_value_keeps_the_last_good_value_not_the_default(
        self, definitions: FlagDefinitions
    ) -> None:
        # Mid-rollout at 20 %, a typo of 150: OpenFeature answered the default (100 %, every caller on
        # hybrid) while logging "keeping the last good values", and /admin/flags named the flag its source.
        definitions.write({"hybrid_rollout_percent": 20, "hybrid_semantic_weight": 0.3})
        definitions.source.resolve(CALLER)

        definitions.write({"hybrid_rollout_percent": 150, "hybrid_semantic_weight": 0.3})
        knobs = definitions.source.resolve(CALLER).knobs
        described = definitions.source.describe()["flags"]

        assert (knobs.hybrid_rollout_percent, knobs.hybrid_semantic_weight) == (20, 0.3)
        assert isinstance(described, dict)
        assert described["hybrid_rollout_percent"]["value"] == 20
        # flagd's adapter keeps the last good definitions whole (its source stays `openfeature`).
        assert described["hybrid_rollout_percent"]["source"] in {"file", "last-good", "openfeature"}
        assert definitions.source.problem() is not None
        assert "hybrid" in (definitions.source.problem() or "").replace("_", "-").lower()

    def test_the_last_good_value_is_the_last_one_served(self, definitions: FlagDefinitions) -> None:
        # OpenFeature remembered a value as last good only the first time it saw it (later ones came
        # from a memo): 20, 30, back to 20, then a broken value answered 30.
        for percent in (20, 30, 20):
            definitions.write({"hybrid_rollout_percent": percent})
            definitions.source.resolve(CALLER)

        definitions.write({"hybrid_rollout_percent": 150})

        assert definitions.source.resolve(CALLER).knobs.hybrid_rollout_percent == 20

    def test_a_boolean_is_not_a_number(self, definitions: FlagDefinitions) -> None:
        # YAML's `on`/`yes`/`true`, or a flagd variant `true`, became 1 (1 % on hybrid), accepted silently.
        definitions.write({"hybrid_rollout_percent": 20, "rrf_k_constant": 9})
        definitions.source.resolve(CALLER)
        errors = reload_errors()

        definitions.write({"hybrid_rollout_percent": True, "rrf_k_constant": 9})
        knobs = definitions.source.resolve(CALLER).knobs

        assert knobs.hybrid_rollout_percent == 20
        assert reload_errors() == errors + 1
        assert "boolean" in (definitions.source.problem() or "")

    def test_describe_shows_every_knob_with_its_value_and_source(self, definitions: FlagDefinitions) -> None:
        definitions.write({"rrf_k_constant": 9})

        described = definitions.source.describe()
        flags = described["flags"]

        assert isinstance(flags, dict)
        assert set(flags) == set(KNOB_NAMES)
        assert described["provider"] == definitions.source.name
        assert flags["rrf_k_constant"]["value"] == 9
        assert flags["rrf_k_constant"]["source"] in {"file", "openfeature"}
        assert flags["rrf_final_k"]["source"] == "default"

    def test_a_blank_routing_flag_leaves_the_env_routing_in_force(self, definitions: FlagDefinitions) -> None:
        # `QUERY_ROUTING_STRATEGIES=` is unset, as every empty variable is, but this flag routed no query at all.
        definitions.write({"query_routing_strategies": ""})

        knobs = definitions.source.resolve(CALLER).knobs

        assert knobs.routable_strategies == {SearchStrategy.HYBRID, SearchStrategy.LEXICAL}

    @pytest.mark.parametrize("blank", ["", "   "], ids=["empty", "blank"])
    @pytest.mark.parametrize("name", STRING_KNOBS)
    def test_a_blank_string_flag_sets_nothing(self, definitions: FlagDefinitions, name: str, blank: str) -> None:
        # Enumerates the string knobs, so a new one cannot miss the rule: a blank `search_strategy` or
        # `ranking_algorithm` refused the whole definitions (the last good stayed, an error counted).
        assert name in OTHER_STRING_VALUES, f"give {name} a value in OTHER_STRING_VALUES"
        definitions.write({})
        env_knobs = definitions.source.resolve(CALLER).knobs
        definitions.write({name: OTHER_STRING_VALUES[name]})
        errors = reload_errors()

        definitions.write({name: blank})
        knobs = definitions.source.resolve(CALLER).knobs
        described = definitions.source.describe()["flags"]

        assert knobs == env_knobs
        assert (definitions.source.problem(), reload_errors()) == (None, errors)
        assert isinstance(described, dict)
        assert described[name]["source"] in {"env", "default"}

    @pytest.mark.parametrize("blank", ["", "   "], ids=["empty", "blank"])
    def test_every_flag_blank_sets_nothing_whatever_its_type(self, definitions: FlagDefinitions, blank: str) -> None:
        # As in the flags file and the environment. A blank number or boolean flag counted as a wrong type on
        # OpenFeature: flagd's gate refused the whole definitions and a provider's answer kept the last good
        # value, an error counted each way, where the file's `rrf_k_constant: ""` is the env's.
        env_knobs = definitions.source.resolve(CALLER).knobs  # no flags yet
        definitions.write({name: other_value(name) for name in KNOB_NAMES})
        assert definitions.source.resolve(CALLER).knobs.rrf_k_constant != env_knobs.rrf_k_constant
        errors = reload_errors()

        definitions.write(dict.fromkeys(KNOB_NAMES, blank))
        knobs = definitions.source.resolve(CALLER).knobs
        described = definitions.source.describe()["flags"]

        assert knobs == env_knobs
        assert (definitions.source.problem(), reload_errors()) == (None, errors)
        assert isinstance(described, dict)
        assert {described[name]["source"] for name in KNOB_NAMES} <= {"env", "default"}
