"""The flag-source port: where a search reads the knobs in force for one caller.

Two adapters pass the same contract suite (`tests/contract/flag_source.py`): the flags file over env
defaults (`app/search/flags.py`, `FLAGS_PROVIDER=file`, the default) and OpenFeature
(`app/engines/openfeature_flags.py`, `FLAGS_PROVIDER=openfeature`). `FixedKnobs` serves evaluation and tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal, Protocol, get_args

from app.knobs import KNOB_NAMES, SearchKnobs

if TYPE_CHECKING:
    from collections.abc import Hashable, Mapping

FlagKind = Literal["boolean", "integer", "float", "string"]


def flag_key(name: str) -> str:
    """The OpenFeature flag key of a knob: its name in kebab case (`rrf_k_constant` -> `rrf-k-constant`)."""
    return name.replace("_", "-")


def _kind(annotation: object) -> FlagKind:
    # `int | None` is an optional integer knob: the flag sets it, leaving the flag out leaves it unset.
    types = set(get_args(annotation)) - {type(None)} or {annotation}
    kinds: tuple[tuple[type, FlagKind], ...] = ((bool, "boolean"), (int, "integer"), (float, "float"))
    return next((kind for python_type, kind in kinds if types == {python_type}), "string")


FLAG_KINDS: Final[Mapping[str, FlagKind]] = {
    name: _kind(field.annotation) for name, field in SearchKnobs.model_fields.items()
}
"""Knob name -> the OpenFeature type its flag is resolved as (strategies and algorithms are strings)."""
BLANK_PROBE_DEFAULT: Final = "not-blank"
"""The default of the string evaluation that asks whether a number or boolean flag answers a blank string (which
OpenFeature reports only as a type mismatch): not blank, so a fallback to the default is never taken for one."""


@dataclass(frozen=True, slots=True)
class FlagContext:
    """Who a search is for, as flag targeting sees it (the OpenFeature evaluation context).

    `targeting_key` is the rollout caller key (`app/search/rollout.py:caller_key`), so fractional
    splits are sticky per caller; `project` and `scopes` let targeting rules pin a project or a grant.
    """

    targeting_key: str
    project: str
    scopes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ResolvedKnobs:
    """The knobs one request runs with, and what decided them.

    `version` is the source's version when they were resolved. `arm` is the rollout arm when the flag
    system itself decided it for this caller (a flagd `fractional` split of `hybrid-rollout-percent`
    into 100/0); None means the service's own bucketing decides from `knobs.hybrid_rollout_percent`.
    """

    knobs: SearchKnobs
    version: int
    arm: Literal["hybrid", "semantic"] | None = None

    @property
    def identity(self) -> Hashable:
        """Equal exactly when the version and every knob value are equal: part of the query-cache key."""
        return (self.version, *(getattr(self.knobs, name) for name in KNOB_NAMES))


class KnobSource(Protocol):
    """Where a service reads the knobs in force."""

    def current(self) -> SearchKnobs:
        """The knobs for no caller in particular (process-wide uses: cache TTL, gauges); immutable."""
        ...

    def resolve(self, context: FlagContext) -> ResolvedKnobs:
        """The knobs for this caller. Never raises: a failing source answers its last good or default knobs."""
        ...

    @property
    def version(self) -> int:
        """Changes whenever the flag definitions in force change (part of cache keys)."""
        ...


class FlagSource(KnobSource, Protocol):
    """A `KnobSource` the process runs in the background and operators inspect (`/admin/flags`, `/readyz`)."""

    name: str

    def describe(self) -> dict[str, object]:
        """The JSON body of `GET /admin/flags`: at least `provider`, `version` and, per knob, `value` and `source`."""
        ...

    def problem(self) -> str | None:
        """Why the flags in force are not the source's current definitions (last good or defaults), else None."""
        ...

    async def run(self) -> None:
        """Background work (polling) until cancelled; may return at once."""
        ...

    def close(self) -> None:
        """Release the source (threads, connections); `resolve` keeps answering the last knobs."""
        ...


class FixedKnobs:
    """A `KnobSource` that never changes: version 0 always, the same knobs for every caller."""

    def __init__(self, knobs: SearchKnobs) -> None:
        self._resolved = ResolvedKnobs(knobs=knobs, version=0)

    def current(self) -> SearchKnobs:
        """The knobs given at construction."""
        return self._resolved.knobs

    def resolve(self, context: FlagContext) -> ResolvedKnobs:  # noqa: ARG002 - the same knobs for everyone
        """The knobs given at construction, version 0."""
        return self._resolved

    @property
    def version(self) -> int:
        """Always 0."""
        return 0
