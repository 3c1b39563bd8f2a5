"""What a flagd definition file must pass before flagd's in-process provider is handed it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import yaml

from app.engines.flagd_definitions import FlagdDefinitionsError, check_definitions
from app.knobs import KNOB_NAMES

if TYPE_CHECKING:
    from collections.abc import Mapping

DOCS = Path(__file__).resolve().parents[2] / "docs" / "operations.md"


def flag(variants: Mapping[str, object], default: str, targeting: object = None) -> dict[str, object]:
    spec: dict[str, object] = {"state": "ENABLED", "variants": variants, "defaultVariant": default}
    if targeting is not None:
        spec["targeting"] = targeting
    return spec


def definitions(**flags: object) -> bytes:
    named = {key.replace("_", "-"): spec for key, spec in flags.items()}
    return json.dumps({"$schema": "https://flagd.dev/schema/v0/flags.json", "flags": named}).encode()


FUSIONS = {"rrf": "rrf", "zscore": "zscore"}
BY_PROJECT = {"cat": [{"var": "$flagd.flagKey"}, {"var": "project"}]}


def test_a_rollout_by_project_with_a_pinned_project_is_accepted() -> None:
    content = definitions(
        ranking_algorithm=flag(FUSIONS, "zscore", {"fractional": [BY_PROJECT, ["rrf", 10], ["zscore", 90]]}),
        hybrid_rollout_percent=flag(
            {"hybrid": 100, "semantic": 0}, "semantic", {"fractional": [["hybrid", 10], ["semantic", 90]]}
        ),
        search_strategy=flag(
            {"hybrid": "hybrid", "lexical": "lexical"},
            "hybrid",
            {"if": [{"==": [{"var": "project"}, "support-tickets"]}, "lexical", None]},
        ),
        query_optimization_enabled=flag({"on": True, "off": False}, "off"),
    )

    assert set(check_definitions(content)["flags"]) == {
        "ranking-algorithm",
        "hybrid-rollout-percent",
        "search-strategy",
        "query-optimization-enabled",
    }


def test_the_example_in_the_operations_guide_is_accepted() -> None:
    text = DOCS.read_text()
    start = text.index('{"$schema": "https://flagd.dev/schema/v0/flags.json"')
    example = text[start : text.index("```", start)]

    assert "hybrid-rollout-percent" in check_definitions(example.encode())["flags"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"flags": {"search-strategy": ', "cannot parse"),
        (b"", "cannot parse"),
        (b"[]", '"flags" mapping'),
        (json.dumps({"flag": {}}).encode(), '"flags" mapping'),
        (json.dumps({"flags": {}, "flagz": {}}).encode(), "unknown top-level key 'flagz'"),
        (definitions(serach_strategy=flag({"a": "lexical"}, "a")), "did you mean search-strategy?"),
        (definitions(search_strategy={"state": "ON", "variants": {"a": "lexical"}}), "'state'"),
        (definitions(search_strategy={**flag({"a": "lexical"}, "a"), "targetting": {}}), "targetting"),
        (definitions(search_strategy=flag({"a": "lexical"}, "b")), "defaultVariant 'b'"),
        (definitions(search_strategy=flag({"a": 42}, "a")), "a whole number (42), not a string"),
        (definitions(search_strategy=flag({"a": "turbo"}, "a")), '"turbo": Input should be'),
        (definitions(query_routing_strategies=flag({"a": ","}, "a")), '",": Value error, names no strategy'),
        (definitions(hybrid_semantic_weight=flag({"a": -1}, "a")), "greater than or equal to 0"),
        (definitions(hybrid_semantic_weight=flag({"a": 1e9}, "a")), "less than or equal to 1"),
        (definitions(rrf_k_constant=flag({"a": 7.5}, "a")), "a number (7.5), not a whole number"),
        (definitions(hybrid_rollout_percent=flag({"a": True}, "a")), "a boolean (true), not a number"),
        (definitions(ranking_algorithm=flag(FUSIONS, "zscore", {"fractional": "oops"})), "buckets"),
        (definitions(ranking_algorithm=flag(FUSIONS, "zscore", {"fractional": [["nope", 10]]})), "'nope'"),
        (definitions(ranking_algorithm=flag(FUSIONS, "zscore", {"fractional": [["rrf", -10]]})), ">= 0"),
        (definitions(ranking_algorithm=flag(FUSIONS, "zscore", {"fractional": [["rrf", 12.5]]})), "whole"),
        (definitions(ranking_algorithm=flag(FUSIONS, "zscore", {"fractional": [["rrf", 0]]})), "sum to 0"),
        (
            definitions(ranking_algorithm=flag(FUSIONS, "zscore", {"fractional": [{"var": "team"}, ["rrf", 1]]})),
            "reads 'team'",
        ),
        (definitions(ranking_algorithm=flag(FUSIONS, "zscore", {"ifff": [True, "rrf", "zscore"]})), "ifff"),
        (definitions(ranking_algorithm=flag(FUSIONS, "zscore", {"if": [True, 5, "zscore"]})), "variant 5"),
    ],
)
def test_definitions_flagd_would_apply_silently_or_fail_per_caller_are_refused(content: bytes, message: str) -> None:
    with pytest.raises(FlagdDefinitionsError) as refused:
        check_definitions(content)

    assert message in str(refused.value)


def test_the_charts_default_feature_flags_are_accepted() -> None:
    values = yaml.safe_load((DOCS.parents[1] / "charts" / "poimen-memory" / "values.yaml").read_text())
    flags = values["openfeature"]["flags"]

    assert set(check_definitions(json.dumps({"flags": flags}).encode())["flags"]) == set(flags)


@pytest.mark.parametrize("blank", ["", "   "], ids=["empty", "blank"])
@pytest.mark.parametrize("name", KNOB_NAMES)
def test_a_blank_variant_of_any_flag_is_accepted_as_setting_nothing(name: str, blank: str) -> None:
    # A number or boolean flag's "" was refused as a string ("not a whole number"), the whole file with it,
    # while the flags file's `rrf_k_constant: ""` sets nothing. Its other variants are still checked.
    content = definitions(**{name: flag({"unset": blank}, "unset")})

    assert check_definitions(content)["flags"][name.replace("_", "-")]["variants"] == {"unset": blank}
