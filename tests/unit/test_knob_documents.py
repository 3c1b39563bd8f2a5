"""The knob model is the one truth: `.env.example`, the chart's values and schema, and the docs follow it."""

from __future__ import annotations

import enum
import json
import re
import types
import typing
from pathlib import Path

import jsonschema
import pytest
import yaml
from annotated_types import Ge, Le

from app.config import Settings
from app.knobs import KNOB_ALIASES, KNOB_NAMES, SearchKnobs, is_blank
from app.search.flags import parse_flags_file
from app.search.knob_source import flag_key

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "poimen-memory"
_JSON_TYPES = {bool: "boolean", int: "integer", float: "number", str: "string"}
BLANK_REFERENCE = {"$ref": "#/definitions/blank"}


def expected_schema(name: str) -> dict[str, object]:
    """The JSON schema a knob's field implies: its type (null when optional), bounds and enum values, or blank.

    A blank string sets nothing in the flags file (`parse_flags_file`), so every knob takes one: a string knob
    as it is, the others through `#/definitions/blank`.
    """
    field = SearchKnobs.model_fields[name]
    annotation = field.annotation
    arguments = typing.get_args(annotation) if isinstance(annotation, types.UnionType) else (annotation,)
    base = next(argument for argument in arguments if argument is not type(None))
    if isinstance(base, type) and issubclass(base, enum.Enum):
        return {"anyOf": [{"enum": [member.value for member in base]}, BLANK_REFERENCE]}
    json_type = _JSON_TYPES[base]
    schema: dict[str, object] = {"type": [json_type, "null"] if type(None) in arguments else json_type}
    for constraint in field.metadata:
        if isinstance(constraint, Ge):
            schema["minimum"] = constraint.ge
        if isinstance(constraint, Le):
            schema["maximum"] = constraint.le
    return schema if base is str else {"anyOf": [schema, BLANK_REFERENCE]}


def env_lines(path: Path) -> dict[str, str]:
    """`NAME=value` lines of an env file, commented-out ones included (`# NAME=value`)."""
    found = {}
    for line in path.read_text().splitlines():
        text = line.lstrip("# ").strip()
        if "=" in text and text.split("=", 1)[0].isupper() and " " not in text.split("=", 1)[0]:
            name, value = text.split("=", 1)
            found[name] = value
    return found


def test_env_example_names_settings_and_its_knob_values_are_the_defaults() -> None:
    lines = env_lines(ROOT / ".env.example")

    unknown = [name for name in lines if name.lower() not in Settings.model_fields]
    knobs = {name.lower(): value for name, value in lines.items() if name.lower() in KNOB_NAMES}
    parsed = SearchKnobs.model_validate(knobs)
    differing = [name for name in knobs if getattr(parsed, name) != SearchKnobs.model_fields[name].default]

    assert unknown == []
    assert knobs
    assert differing == []


def test_chart_flags_schema_lists_every_knob_and_alias_with_its_constraints() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())["properties"]["flags"]

    expected = {name: expected_schema(name) for name in KNOB_NAMES}
    expected.update({alias: expected_schema(name) for alias, name in KNOB_ALIASES.items()})

    assert schema["additionalProperties"] is False
    assert schema["properties"] == expected


# Every character Python strips (`is_blank`) is below U+3001; the others are what a blank rule could wrongly take.
_BLANK_CANDIDATES = (*map(chr, range(0x3001)), "", "   ", " \t\n ", "\u3000\u00a0", "\u200b", "\ufeff", " x ", "0")


def test_chart_blank_is_the_apps_blank() -> None:
    blank = json.loads((CHART / "values.schema.json").read_text())["definitions"]["blank"]
    validator = jsonschema.Draft7Validator(blank)

    disagree = [value for value in _BLANK_CANDIDATES if validator.is_valid(value) != is_blank(value)]

    assert disagree == []
    assert validator.is_valid(" \u2028 ")


def test_chart_values_are_valid_knobs() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    config_knobs = {name.lower(): value for name, value in values["config"].items() if name.lower() in KNOB_NAMES}

    flags, file_keys = parse_flags_file(yaml.safe_dump(values["flags"]).encode(), base=SearchKnobs())
    from_env = SearchKnobs.model_validate(config_knobs)

    assert file_keys == set(values["flags"])
    assert flags.ranking_algorithm == from_env.ranking_algorithm
    assert flags.rrf_k_constant == from_env.rrf_k_constant


@pytest.mark.parametrize("name", KNOB_NAMES)
def test_readme_lists_every_knob_with_its_default(name: str) -> None:
    readme = (ROOT / "README.md").read_text()
    default = SearchKnobs.model_fields[name].default
    shown = "unset" if default is None else str(default.value if isinstance(default, enum.Enum) else default).lower()

    assert f"| `{name.upper()}` | {shown} |" in readme


def test_chart_openfeature_flags_schema_names_every_knob_in_kebab_case() -> None:
    # The service evaluates every knob as a flag; the schema refused eleven of them (the evidence boosts,
    # rate limits, neighbour sharing, ...), so a FeatureFlag could not set them.
    schema = json.loads((CHART / "values.schema.json").read_text())["properties"]["openfeature"]["properties"]

    assert schema["flags"]["propertyNames"]["enum"] == sorted(flag_key(name) for name in KNOB_NAMES)


# The README's Configuration tables: every setting of `app/config.py` (knobs included) has a row, every row
# names a setting, and the default column says the code's default. Reference names the service refuses or
# aliases are named in the prose around the tables instead.
_REFUSED_REFERENCE_NAMES = ("enable_semantic_fallback", "chunk_dedup_enabled", "pgvector_index_lists",
                            "opensearch_refresh_interval")  # fmt: skip
_ALIASES = {"final_result_k": "rrf_final_k"}
_ENV_READ_OUTSIDE_SETTINGS = {"POIMEN_MIGRATIONS_DIR"}  # app/engines/migrate.py reads it before any Settings
# Defaults the code leaves unset and works out at start: the cell says what they come to.
_DERIVED_DEFAULTS = {
    "flagd_resolver": "in-process with a flag file, else `rpc`",
    "flagd_port": "8013 (rpc) / 8015 (in-process sync)",
    "embedding_onnx_dir": "unset: `POIMEN_DATA_DIR/models`",
}


def readme_settings_rows() -> dict[str, str]:
    """Each env name in the first column of the README's Configuration tables -> its default cell."""
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("\n## Configuration\n") : readme.index("\n## Deploy to Kubernetes\n")]
    rows: dict[str, str] = {}
    for line in section.splitlines():
        if not line.startswith("| `"):
            continue
        names_cell, default_cell = (cell.strip() for cell in line.strip("|").split(" | ")[:2])
        names = re.findall(r"`([A-Z][A-Z0-9_]*)`", names_cell)
        defaults = [cell.strip() for cell in default_cell.split(", ")] if len(names) > 1 else [default_cell]
        if len(defaults) != len(names):  # `localhost`, 8013 (rpc) / 8015 (...): one per name, commas inside
            defaults = [default_cell] * len(names)
        rows.update(zip(names, defaults, strict=True))
    return rows


def default_matches(name: str, cell: str) -> bool:
    """Whether a README default cell says the code's default of setting `name` (its first word is the value)."""
    if name in _DERIVED_DEFAULTS:
        return _DERIVED_DEFAULTS[name] in cell
    default = Settings.model_fields[name].default
    if default is None:
        return cell.startswith("unset")
    shown = re.split(r"[ (:]", cell.replace("`", ""), maxsplit=1)[0]
    value = default.value if isinstance(default, enum.Enum) else default
    if isinstance(value, bool):
        return shown == str(value).lower()
    if isinstance(value, (int, float)):
        return float(shown) == value
    if isinstance(value, Path):
        return Path(shown) == value
    return shown == str(value)


def test_readme_settings_tables_list_every_setting() -> None:
    rows = readme_settings_rows()
    expected = set(Settings.model_fields) - set(_REFUSED_REFERENCE_NAMES) - set(_ALIASES)

    missing = sorted(name.upper() for name in expected if name.upper() not in rows)
    unknown = sorted(name for name in rows if name.lower() not in expected and name not in _ENV_READ_OUTSIDE_SETTINGS)

    assert missing == []
    assert unknown == []


def test_readme_settings_tables_state_the_code_defaults() -> None:
    rows = readme_settings_rows()

    wrong = {name: cell for name, cell in rows.items() if name.lower() in Settings.model_fields
             and not default_matches(name.lower(), cell)}  # fmt: skip

    assert wrong == {}


def test_readme_names_the_refused_reference_settings_and_the_alias() -> None:
    readme = (ROOT / "README.md").read_text()

    absent = [name.upper() for name in (*_REFUSED_REFERENCE_NAMES, *_ALIASES) if f"`{name.upper()}" not in readme]

    assert absent == []
