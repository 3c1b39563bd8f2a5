"""The abbreviation table the optimizer expands (`k8s` -> `kubernetes`), kept as package data."""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from types import MappingProxyType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping

ABBREVIATIONS_RESOURCE = "abbreviations.json"


@lru_cache(maxsize=1)
def load_abbreviations() -> Mapping[str, str]:
    """Return the bundled table, lowercase abbreviation -> lowercase expansion; read once per process."""
    text = resources.files("app.query").joinpath(ABBREVIATIONS_RESOURCE).read_text(encoding="utf-8")
    raw = json.loads(text)
    if not isinstance(raw, dict):
        msg = f"{ABBREVIATIONS_RESOURCE} must hold one JSON object"
        raise TypeError(msg)
    return MappingProxyType({str(key).lower(): str(value).lower() for key, value in raw.items()})
