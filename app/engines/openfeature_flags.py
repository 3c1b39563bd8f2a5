"""`FlagSource` over OpenFeature (`FLAGS_PROVIDER=openfeature`): every knob is a flag named in kebab case.

A knob's flag (`search-strategy`, `hybrid-rollout-percent`, `ranking-algorithm`, ...) has the env knob's
meaning and is evaluated per request with the caller's context: targeting key = the rollout caller
key, attributes `project` and `scopes`. A knob without a flag, or whose flag answers an empty or blank
string (a number or boolean flag's too: not a wrong type, no value), keeps its env/settings value.

Failure never reaches a search: an evaluation that errors (provider down, wrong type, invalid value)
answers the flag's last good value, else the env/settings default, and a provider error counts into
`poimen_flags_reload_errors_total` once per distinct message and shows in `/readyz` and `/admin/flags`.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import time
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

from openfeature import api
from openfeature.evaluation_context import EvaluationContext
from openfeature.event import EventDetails, ProviderEvent
from openfeature.exception import ErrorCode
from openfeature.flag_evaluation import Reason
from openfeature.provider import ProviderStatus
from openfeature.provider.no_op_provider import NoOpProvider
from pydantic import ValidationError

from app.engines.openfeature_provider import evaluation_hooks
from app.knobs import KNOB_NAMES, SearchKnobs, is_blank
from app.observability.metrics import FLAGS_RELOAD_ERRORS_TOTAL, publish_flags
from app.search.flags import knobs_from_settings
from app.search.knob_source import BLANK_PROBE_DEFAULT, FLAG_KINDS, ResolvedKnobs, flag_key

if TYPE_CHECKING:
    from openfeature.client import OpenFeatureClient
    from openfeature.flag_evaluation import FlagEvaluationDetails
    from openfeature.provider import FeatureProvider

    from app.config import Settings
    from app.engines.flagd_definitions import FlagdDefinitionsGate
    from app.search.knob_source import FlagContext

logger = logging.getLogger(__name__)

PER_CALLER_REASONS: Final = frozenset({Reason.TARGETING_MATCH, Reason.SPLIT})
"""Reasons that mean the value was chosen for this caller (a targeting rule or a fractional split)."""
MAX_MEMOIZED_KNOBS: Final = 1024
FULL_PERCENT: Final = 100.0
_domains = itertools.count(1)

FlagOrigin = Literal["openfeature", "last-good", "env", "default"]

_FLAGD_NO_CALLER_MESSAGES: Final = frozenset(
    {"No valid string targetingKey provided for fractional shorthand syntax.", "No hashKey value resolved"}
)
"""What flagd's in-process evaluator logs at ERROR for a `fractional` split evaluated without a targeting key."""
_evaluating_without_caller: ContextVar[bool] = ContextVar("evaluating_without_caller", default=False)


class NoCallerSplitFilter(logging.Filter):
    """Drops flagd's ERROR lines about a missing targeting key while the knobs are read for no caller.

    `current()` (the rate limit's knobs on every request, the cache TTL) and `describe()` evaluate with an
    empty context on purpose; a `fractional` split then answers its default variant, which is what they
    want, but flagd logged two ERROR lines each time: two per request with the documented rollout file.
    A caller's evaluation without a key still logs them.
    """

    def filter(self, record: logging.LogRecord) -> bool:  # noqa: D102 - documented on the class
        return not (_evaluating_without_caller.get() and record.msg in _FLAGD_NO_CALLER_MESSAGES)


_NO_CALLER_SPLIT_FILTER: Final = NoCallerSplitFilter()
FLAGD_TARGETING_LOGGER: Final = "openfeature.contrib"


@dataclass(frozen=True, slots=True)
class FlagValue:
    """One knob as evaluated: its value, where it came from, and the provider's variant and reason."""

    value: Any
    origin: FlagOrigin
    variant: str | None = None
    reason: str | None = None


def split_arm(knobs: SearchKnobs) -> Literal["hybrid", "semantic"] | None:
    """The arm a per-caller `hybrid-rollout-percent` of 100 or 0 puts the caller on; None for anything between."""
    if knobs.hybrid_rollout_percent >= FULL_PERCENT:
        return "hybrid"
    return "semantic" if knobs.hybrid_rollout_percent <= 0 else None


class OpenFeatureKnobs:
    """The knobs from an OpenFeature provider, per caller; registered under its own SDK domain.

    Each instance is a separate client (two in one process behave as two replicas). Flags the provider
    reports as not found are not asked again until its flag definitions change (configuration-changed
    or ready event), so a request evaluates only the flags that exist.
    """

    name = "openfeature"

    def __init__(
        self,
        settings: Settings,
        *,
        provider: FeatureProvider,
        wait_s: float | None = None,
        definitions: FlagdDefinitionsGate | None = None,
    ) -> None:
        self._settings = settings
        self._definitions = definitions
        self._defaults = knobs_from_settings(settings)
        self._default_values = self._defaults.model_dump()
        self._domain = f"poimen-flags-{next(_domains)}"
        self._lock = threading.Lock()
        self._version = 0
        self._absent: frozenset[str] = frozenset()
        self._last_good: dict[str, Any] = {}
        self._memo: dict[tuple[tuple[str, str, Any], ...], SearchKnobs] = {}
        self._reported: set[str] = set()
        self._tripped = False
        self.last_error: str | None = None
        api.set_provider(provider, domain=self._domain)
        self._client: OpenFeatureClient = api.get_client(domain=self._domain)
        self._client.add_hooks(evaluation_hooks())
        flagd_logger = logging.getLogger(FLAGD_TARGETING_LOGGER)
        if _NO_CALLER_SPLIT_FILTER not in flagd_logger.filters:
            flagd_logger.addFilter(_NO_CALLER_SPLIT_FILTER)
        self._wait_until_started(settings.flags_provider_wait_s if wait_s is None else wait_s)
        self._handlers = (
            (ProviderEvent.PROVIDER_CONFIGURATION_CHANGED, self._definitions_changed),
            (ProviderEvent.PROVIDER_READY, self._provider_ready),
            (ProviderEvent.PROVIDER_ERROR, self._provider_failed),
            (ProviderEvent.PROVIDER_STALE, self._provider_failed),
        )
        for event, handler in self._handlers:
            self._client.add_handler(event, handler)
        self._publish()

    @property
    def provider_name(self) -> str:
        """The provider's own name (`FlagdProvider`, ...), as `/admin/flags` reports it."""
        return self._client.provider.get_metadata().name

    @property
    def version(self) -> int:
        """Plus one on every change of the provider's flag definitions (or its recovery)."""
        return self._version

    def current(self) -> SearchKnobs:
        """The knobs for no caller in particular (empty evaluation context)."""
        knobs, _ = self._evaluate_for_no_caller()
        return knobs

    def resolve(self, context: FlagContext) -> ResolvedKnobs:
        """The knobs for this caller; the arm too when `hybrid-rollout-percent` was split to 100/0 for them."""
        version = self._version
        evaluation_context = EvaluationContext(
            targeting_key=context.targeting_key,
            attributes={"project": context.project, "scopes": list(context.scopes)},
        )
        knobs, values = self._evaluate(evaluation_context)
        percent = values.get("hybrid_rollout_percent")
        per_caller = percent is not None and percent.origin == "openfeature" and percent.reason in PER_CALLER_REASONS
        return ResolvedKnobs(knobs=knobs, version=version, arm=split_arm(knobs) if per_caller else None)

    def describe(self) -> dict[str, object]:
        """`GET /admin/flags`: provider and status, version, last error, and per knob its flag, value and source."""
        knobs, values = self._evaluate_for_no_caller()
        provider = self.provider_name
        flags: dict[str, object] = {}
        for name in KNOB_NAMES:
            evaluated = values.get(name)
            origin = evaluated.origin if evaluated is not None else self._default_origin(name)
            flags[name] = {
                "flag": flag_key(name),
                "value": knobs.model_dump(mode="json")[name],
                "source": origin,
                "provider": provider if origin in {"openfeature", "last-good"} else None,
                "variant": evaluated.variant if evaluated is not None else None,
                "reason": evaluated.reason if evaluated is not None else None,
            }
        return {
            "provider": self.name,
            "provider_name": provider,
            "status": self._client.get_provider_status().value,
            "version": self._version,
            "file": str(self._definitions.source) if self._definitions is not None else None,
            "last_error": self.problem(),
            "flags": flags,
        }

    def problem(self) -> str | None:
        """Why the flag file was refused (its last good definitions stay), else the provider's unrecovered error."""
        refused = self._definitions.last_error if self._definitions is not None else None
        return refused or self.last_error

    def check_definitions(self) -> bool:
        """Read the flag file once (see `FlagdDefinitionsGate.check`); True when flagd is handed new definitions."""
        return self._definitions.check() if self._definitions is not None else False

    async def run(self) -> None:
        """Check the flag file every `FLAGS_POLL_INTERVAL_S`; flagd watches the checked copy on its own thread."""
        if self._definitions is None:
            return
        while True:
            await asyncio.sleep(self._settings.flags_poll_interval_s)
            try:
                await asyncio.to_thread(self._definitions.check)
            except Exception as error:  # noqa: BLE001 - one failed read must not end hot reload for good
                self._report(f"reading {self._definitions.source} failed: {type(error).__name__}: {error}")

    def close(self) -> None:
        """Stop listening and hand the domain to a no-op provider; the SDK shuts the real one down."""
        for event, handler in self._handlers:
            self._client.remove_handler(event, handler)
        api.set_provider(NoOpProvider(), domain=self._domain)
        if self._definitions is not None:
            self._definitions.close()

    def _default_origin(self, name: str) -> FlagOrigin:
        return "env" if name in self._settings.model_fields_set else "default"

    def _evaluate_for_no_caller(self) -> tuple[SearchKnobs, dict[str, FlagValue]]:
        token = _evaluating_without_caller.set(True)
        try:
            return self._evaluate(EvaluationContext())
        finally:
            _evaluating_without_caller.reset(token)

    def _evaluate(self, context: EvaluationContext) -> tuple[SearchKnobs, dict[str, FlagValue]]:
        absent = self._absent
        values: dict[str, FlagValue] = {}
        for name in KNOB_NAMES:
            key = flag_key(name)
            if key in absent:
                continue
            evaluated = self._last_good_value(name) if self._tripped else self._evaluate_flag(name, key, context)
            if evaluated is not None:
                values[name] = evaluated
        return self._knobs(values), values

    def _last_good_value(self, name: str) -> FlagValue | None:
        if name not in self._last_good:
            return None
        return FlagValue(self._last_good[name], "last-good", None, str(Reason.ERROR))

    def _evaluate_flag(self, name: str, key: str, context: EvaluationContext) -> FlagValue | None:
        fallback = self._last_good.get(name, self._default_values[name])
        details = self._details(name, key, fallback, context)
        if details.reason == Reason.DISABLED:
            return None  # a flag turned off leaves its knob to env, as no flag does (flagd answers our fallback)
        if details.reason != Reason.ERROR and is_blank(details.value):
            return None  # a blank string sets nothing, as an empty variable does: the env value stands
        if details.reason != Reason.ERROR:
            return FlagValue(details.value, "openfeature", details.variant, str(details.reason))
        if details.error_code == ErrorCode.FLAG_NOT_FOUND:
            with self._lock:
                self._absent = self._absent | {key}
            return None
        if details.error_code == ErrorCode.TYPE_MISMATCH and FLAG_KINDS[name] != "string" and self._blank(key, context):
            return None  # a number or boolean flag's blank variant: not a wrong value but none, as a blank string
        if self._client.get_provider_status() != ProviderStatus.READY:
            # A provider that is down (an unreachable sidecar) fails every flag, each after its deadline:
            # stop asking until it is ready again, so a search never waits on it.
            self._tripped = True
            self._report(f"provider {self._client.get_provider_status().value.lower()}: {details.error_message}")
        else:
            self._report(f"{key}: {details.error_code}: {details.error_message}")
        return self._last_good_value(name)

    def _blank(self, key: str, context: EvaluationContext) -> bool:
        """Whether flag `key` answers a blank string: the SDK reports a typed flag's one as a type mismatch only."""
        details = self._client.get_string_details(key, BLANK_PROBE_DEFAULT, context)
        return details.reason != Reason.ERROR and is_blank(details.value)

    def _details(self, name: str, key: str, fallback: Any, context: EvaluationContext) -> FlagEvaluationDetails[Any]:  # noqa: ANN401
        kind = FLAG_KINDS[name]
        client = self._client
        if kind == "boolean":
            return client.get_boolean_details(key, bool(fallback), context)
        if kind == "integer":
            return client.get_integer_details(key, fallback if isinstance(fallback, int) else 0, context)
        if kind == "float":
            return client.get_float_details(key, float(fallback) if fallback is not None else 0.0, context)
        text = fallback.value if hasattr(fallback, "value") else str(fallback)
        return client.get_string_details(key, text, context)

    def _knobs(self, values: dict[str, FlagValue]) -> SearchKnobs:
        # The type is part of the key: True == 1 == 1.0 in Python, but only the numbers are valid numbers.
        overrides = tuple(sorted((name, type(value.value).__name__, value.value) for name, value in values.items()))
        knobs = self._memo.get(overrides)
        if knobs is None:
            knobs, valid = self._validated(values)
            if valid:  # a fallback depends on the last good values of the time: not memoized
                if len(self._memo) >= MAX_MEMOIZED_KNOBS:
                    self._memo.clear()
                self._memo[overrides] = knobs
        for name, value in values.items():
            if value.origin == "openfeature":
                self._last_good[name] = value.value
        return knobs

    def _validated(self, values: dict[str, FlagValue]) -> tuple[SearchKnobs, bool]:
        """The knobs `values` make, and whether every value was valid.

        A flag whose value is refused answers its last good value, else the env/settings default (its
        entry in `values` says which); a rule across knobs (both weights 0) refuses every flag it names.
        """
        base = self._defaults.model_dump(exclude_unset=True)
        accepted = {name: value.value for name, value in values.items()}
        try:
            return SearchKnobs.model_validate({**base, **accepted}), True
        except ValidationError as error:
            reasons = {str(item["loc"][0]) if item["loc"] else "": item["msg"] for item in error.errors()}
        rejected = (set(reasons) & set(accepted)) or set(accepted)
        for name in sorted(rejected):
            reason = reasons.get(name) or next(iter(reasons.values()))
            self._report(f"{flag_key(name)}: invalid value {accepted[name]!r}: {reason}")
            last_good = self._last_good_value(name)
            values[name] = last_good or FlagValue(self._default_values[name], self._default_origin(name))
            if last_good is None:
                accepted.pop(name)
            else:
                accepted[name] = last_good.value
        try:
            return SearchKnobs.model_validate({**base, **accepted}), False
        except ValidationError:
            for name in values:
                values[name] = FlagValue(self._default_values[name], self._default_origin(name))
            return self._defaults, False

    def _wait_until_started(self, wait_s: float) -> None:
        deadline = time.monotonic() + wait_s
        while self._client.get_provider_status() == ProviderStatus.NOT_READY and time.monotonic() < deadline:
            time.sleep(0.01)
        status = self._client.get_provider_status()
        if status != ProviderStatus.READY:
            self._tripped = True  # until its ready or configuration-changed event
            self._provider_failed(EventDetails(message=f"provider {status.value.lower()} after {wait_s:g} s"))

    def _definitions_changed(self, details: EventDetails) -> None:  # noqa: ARG002 - the SDK's handler signature
        with self._lock:
            self._absent = frozenset()
            self._reported = set()
            self._version += 1
            self._tripped = False
            self.last_error = None
        logger.info("flags version %d from %s", self._version, self.provider_name)
        self._publish()

    def _provider_ready(self, details: EventDetails) -> None:  # noqa: ARG002 - the SDK's handler signature
        # Ready again (reconnected, or a good file after a broken one): flags may exist that were missing.
        with self._lock:
            self._absent = frozenset()
            self._tripped = False
            self.last_error = None

    def _provider_failed(self, details: EventDetails) -> None:
        self._report(details.message or "provider error")

    def _report(self, message: str) -> None:
        with self._lock:
            self.last_error = message
            if message in self._reported:
                return
            self._reported.add(message)
        FLAGS_RELOAD_ERRORS_TOTAL.inc()
        logger.warning("flags from %s degraded, keeping the last good values: %s", self.provider_name, message)

    def _publish(self) -> None:
        publish_flags(version=self._version, knobs=self.current())
