"""Variables spelt almost like a setting: named at start with the setting they probably mean.

Settings are read from variables named after them, with no prefix of their own (`app/config.py`), so the
environment (PATH, HOME, Kubernetes' service links, other libraries' variables) cannot be refused as a
whole, and pydantic-settings ignores every variable it has no field for: `HYBRID_ROLOUT_PERCENT=20` left
the rollout at 100 % in silence. A variable that is no setting, in any case, but within a typo or two of
one (difflib's ratio at least `CLOSE_MATCH_CUTOFF`) is named instead, with that setting. Not refused: it
may still be another program's. `POIMEN_` is no prefix the service owns either: Kubernetes names a
Service's links after it (`POIMEN_MEMORY_SERVICE_HOST` for `poimen-memory`).
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import TYPE_CHECKING, Final

from dotenv import dotenv_values

from app.config import Settings
from app.knobs import KNOB_ALIASES

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

CLOSE_MATCH_CUTOFF: Final = 0.9
"""One letter dropped, doubled or swapped in a name of 10 characters or more; no shell's or library's own
variable the service is run with comes this close (tests/unit/test_misspelt_settings.py)."""
OTHER_READERS: Final = frozenset(
    {
        "POIMEN_MIGRATIONS_DIR",  # `app/engines/migrate.py`
        # OpenTelemetry's per-signal variants of OTEL_EXPORTER_OTLP_ENDPOINT, read by its exporters.
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
        "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT",
    }
)
"""Variables close to a setting's name that the service or a library it runs with reads as they are."""


def closest_name(spelt: str, names: Iterable[str]) -> str | None:
    """The one of `names` that `spelt` is spelt almost like (difflib's ratio at least `CLOSE_MATCH_CUTOFF`), else None.

    Case counts: give both in one case.
    """
    close = difflib.get_close_matches(spelt, names, n=1, cutoff=CLOSE_MATCH_CUTOFF)
    return close[0] if close else None


def setting_names() -> frozenset[str]:
    """Every variable name a setting is read from, upper case (reference aliases included)."""
    return frozenset(name.upper() for name in (*Settings.model_fields, *KNOB_ALIASES))


def misspelt_settings(environment: Mapping[str, str], *, env_file: Path | None = Path(".env")) -> list[tuple[str, str]]:
    """(variable, the setting it probably means) for each variable spelt almost like a setting, sorted.

    The variables are those of `environment` and the keys of `env_file` (when it exists), in any case.
    """
    names = setting_names()
    variables = set(environment)
    if env_file is not None and env_file.is_file():
        variables |= set(dotenv_values(env_file))
    found = []
    for variable in sorted(variables):
        spelt = variable.upper()
        if spelt in names or spelt in OTHER_READERS:
            continue
        close = closest_name(spelt, names)
        if close is not None:
            found.append((variable, close))
    return found


def misspelt_settings_lines(environment: Mapping[str, str]) -> list[str]:
    """One line for each of `misspelt_settings(environment)` (and of `.env`), for a log or a terminal."""
    return [
        f"{variable} is not a setting and is ignored: did you mean {setting}?"
        for variable, setting in misspelt_settings(environment)
    ]
