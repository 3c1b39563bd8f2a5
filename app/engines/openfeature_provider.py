"""The OpenFeature provider the flags come from, built from settings, and the hooks every evaluation runs.

`OPENFEATURE_PROVIDER=flagd` (the default) builds flagd's provider: in-process over a flag definition
file (`FLAGD_RESOLVER=in-process` or `file` with `FLAGD_OFFLINE_FLAG_SOURCE_PATH`, no sidecar needed),
in-process syncing from a flagd service (`in-process` with `FLAGD_HOST`/`FLAGD_PORT`), or remote
evaluation by a flagd sidecar (`rpc`). flagd's provider reads its other `FLAGD_*` variables itself
(`FLAGD_TLS`, `FLAGD_DEADLINE_MS`, ...). Any other value is `module:factory`, a callable taking no
arguments that returns an OpenFeature provider: how a vendor's provider is plugged in.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, cast

from openfeature.contrib.hook.opentelemetry import TracingHook
from openfeature.contrib.provider.flagd import FlagdProvider
from openfeature.contrib.provider.flagd.config import ResolverType
from openfeature.hook import Hook

from app.engines.flagd_definitions import FlagdDefinitionsGate
from app.observability.metrics import record_flag_evaluation

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from openfeature.flag_evaluation import FlagEvaluationDetails, FlagValueType
    from openfeature.hook import HookContext, HookHints
    from openfeature.provider import FeatureProvider

    from app.config import Settings

FLAGD_PROVIDER = "flagd"


class ProviderConfigurationError(ValueError):
    """`OPENFEATURE_PROVIDER` names no importable provider factory."""


def flagd_resolver(settings: Settings) -> ResolverType:
    """The flagd resolver: `FLAGD_RESOLVER`, else in-process when a flag file is given, else flagd's default (rpc)."""
    if settings.flagd_resolver is not None:
        return ResolverType(settings.flagd_resolver)
    return ResolverType.IN_PROCESS if settings.flagd_offline_flag_source_path is not None else ResolverType.RPC


def definitions_gate(settings: Settings) -> FlagdDefinitionsGate | None:
    """The checked copy of `FLAGD_OFFLINE_FLAG_SOURCE_PATH` flagd's provider is to watch; None without a flag file."""
    path = settings.flagd_offline_flag_source_path
    if settings.openfeature_provider != FLAGD_PROVIDER or path is None or flagd_resolver(settings) == ResolverType.RPC:
        return None
    return FlagdDefinitionsGate(path)


def build_provider(settings: Settings, *, definitions_path: Path | None = None) -> FeatureProvider:
    """The provider `OPENFEATURE_PROVIDER` names, configured from settings; raises `ProviderConfigurationError`.

    `definitions_path`: the file flagd watches instead of `FLAGD_OFFLINE_FLAG_SOURCE_PATH` (a gate's checked copy).
    """
    if settings.openfeature_provider == FLAGD_PROVIDER:
        path = definitions_path or settings.flagd_offline_flag_source_path
        return FlagdProvider(
            resolver_type=flagd_resolver(settings),
            offline_flag_source_path=str(path) if path is not None else None,
            host=settings.flagd_host,
            port=settings.flagd_port,
        )
    module_name, _, attribute = settings.openfeature_provider.partition(":")
    try:
        factory = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError, ValueError) as error:
        message = (
            f"OPENFEATURE_PROVIDER={settings.openfeature_provider!r}: not 'flagd' nor an importable module:factory"
        )
        raise ProviderConfigurationError(message) from error
    return cast("FeatureProvider", cast("Callable[[], object]", factory)())


class EvaluationMetricsHook(Hook):
    """Counts every evaluation into `poimen_flag_evaluations_total{flag,variant,reason}`."""

    def finally_after(
        self,
        hook_context: HookContext,
        details: FlagEvaluationDetails[FlagValueType],
        hints: HookHints,  # noqa: ARG002 - the SDK's hook signature
    ) -> None:
        """Record the flag key, the variant and the reason of the finished evaluation."""
        record_flag_evaluation(hook_context.flag_key, variant=details.variant, reason=details.reason)


def evaluation_hooks() -> list[Hook]:
    """The hooks of the flags client: Prometheus counts, and OpenTelemetry span events (`feature_flag.evaluation`)."""
    return [EvaluationMetricsHook(), TracingHook()]
