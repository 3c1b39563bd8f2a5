"""Operator endpoints: the effective flags, a lexical rebuild, and the split liveness/readiness probes."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final, cast

from litestar import Controller, Response, get, post
from litestar.datastructures import State
from litestar.openapi.datastructures import ResponseSpec
from litestar.status_codes import HTTP_200_OK, HTTP_503_SERVICE_UNAVAILABLE

from app.api.dependencies import Injected
from app.api.errors import problem_responses
from app.api.guards import admin_guard, public
from app.api.project_routes import PROJECT_WRITE_ERROR_RESPONSES, ProjectPath
from app.api.project_schemas import ReindexOut
from app.domain.errors import EngineError
from app.ingestion.reindex import rebuild_project
from app.wiring.services import Services

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

READINESS_CACHE_S: Final = 1.0
READINESS_STATE_KEY: Final = "readiness"
"""Where the app's state keeps the last readiness answer, with the monotonic time it was checked at."""
PING_TIMEOUT_S: Final = 2.0
READY: Final = "ready"
DEGRADED: Final = "degraded"
NOT_READY: Final = "not ready"
SEARCH_LEG_CHECKS: Final = ("vector", "lexical")
"""The engines of the two search legs: while one answers, searches are answered (`degraded`)."""


def readiness_status(checks: dict[str, str]) -> str:
    """What a probe reads from the checks.

    `ready` when every check is ok; `degraded` when the model is loaded and at least one search leg's
    engine is ok; `not ready` otherwise.
    """
    if all(value == "ok" for value in checks.values()):
        return READY
    if checks.get("model") == "ok" and any(checks.get(leg) == "ok" for leg in SEARCH_LEG_CHECKS):
        return DEGRADED
    return NOT_READY


class AdminController(Controller):
    """Operator endpoints."""

    tags = ["admin"]  # noqa: RUF012 - Litestar reads it as a class attribute

    @get(
        "/admin/flags",
        summary="Effective flags and where each value came from",
        guards=[admin_guard],
        responses=problem_responses(400, 401, 403),  # 400: a query parameter it does not take
    )
    async def flags(self, services: Injected[Services]) -> dict[str, Any]:
        """The live flags, each value with its source: env, the flags file, or the OpenFeature provider's variant."""
        return services.flags.describe()

    @post(
        "/v1/projects/{project:str}/reindex",
        summary="Rebuild a project's lexical index",
        status_code=HTTP_200_OK,
        guards=[admin_guard],
        responses=PROJECT_WRITE_ERROR_RESPONSES,
    )
    async def reindex(
        self,
        project: ProjectPath,
        services: Injected[Services],
    ) -> ReindexOut:
        """Queue every document of the project for lexical indexing from PostgreSQL, the source of truth.

        Answers once they are queued; the outbox indexes them in the background (`pending` of
        `GET /v1/projects/{project}` counts down). A project without documents (a misspelt id) queues 0.
        Overlapping calls take turns and leave one outbox entry per document. Needs the `admin` scope.
        """
        queued = await rebuild_project(services.engines.store, project)
        services.outbox.wake()
        return ReindexOut(project=project, queued_documents=queued)


class HealthController(Controller):
    """Split probes: liveness never touches an engine; readiness checks them all and fails when nothing can answer."""

    tags = ["health"]  # noqa: RUF012 - Litestar reads it as a class attribute
    opt = public

    @get("/healthz", summary="Liveness: the process answers")
    async def live(self) -> dict[str, str]:
        """Always ok while the process serves."""
        return {"status": "ok"}

    @get(
        "/readyz",
        summary="Readiness: the model loaded and at least one search leg's engine reachable",
        responses={
            HTTP_503_SERVICE_UNAVAILABLE: ResponseSpec(
                data_container=dict[str, Any],
                description="Not ready: starting, the model not loaded, or neither search leg's engine reachable",
            )
        },
    )
    async def ready(self, state: State) -> Response[dict[str, Any]]:
        """200 `ready`, or `degraded` while one search leg's engine is down; 503 when nothing could answer.

        One leg down leaves every replica as able as the others to answer (searches are `degraded`,
        writes wait in the outbox or answer 503 on their own): failing readiness there took every pod out
        of the Service at once, for an OpenSearch outage, or one project's missing index, that the
        searches themselves survive. Cached for a second.
        """
        body = await cached_readiness(state, lambda: _readiness(state.get("services")), now_s=time.monotonic())
        status = HTTP_200_OK if body["status"] in {READY, DEGRADED} else HTTP_503_SERVICE_UNAVAILABLE
        return Response(body, status_code=status)


async def cached_readiness(
    state: State, check: Callable[[], Awaitable[dict[str, Any]]], *, now_s: float
) -> dict[str, Any]:
    """The answer `state` holds when it is under `READINESS_CACHE_S` old at `now_s` (monotonic), else `check()`'s.

    A new answer is kept in `state` with `now_s`, when it was asked for: the probes of the period that follows
    (kubelet, load balancer, an operator's curl) reuse it. Probes that come while a check runs each run their own.
    """
    cached = state.get(READINESS_STATE_KEY)
    if cached is not None and now_s - cached[0] < READINESS_CACHE_S:
        return cast("dict[str, Any]", cached[1])
    body = await check()
    state[READINESS_STATE_KEY] = (now_s, body)
    return body


async def engine_checks(pings: Mapping[str, Callable[[], Awaitable[None]]]) -> dict[str, str]:
    """Each engine's check, "ok" or "down: <error>", all at once within one `PING_TIMEOUT_S`.

    One after another, a hung PostgreSQL (the vector and the store pings both) took 4 s, past the probe's
    3 s: the kubelet marked every pod unready at once, where the answer was to be "degraded".
    """

    async def check(ping: Callable[[], Awaitable[None]]) -> str:
        try:
            async with asyncio.timeout(PING_TIMEOUT_S):
                await ping()
        except (EngineError, TimeoutError) as error:
            return f"down: {type(error).__name__}"
        return "ok"

    results = await asyncio.gather(*(check(ping) for ping in pings.values()))
    return dict(zip(pings, results, strict=True))


async def _readiness(services: Services | None) -> dict[str, Any]:
    if services is None:
        return {"status": "starting", "checks": {}}
    engines = services.engines
    checks: dict[str, str] = {"model": "ok" if engines.embedder.dimensions > 0 else "not loaded"}
    checks |= await engine_checks(
        {"vector": engines.vector.ping, "store": engines.store.ping, "lexical": engines.lexical.ping}
    )
    # A flags problem is a detail, not a readiness failure: search runs on the last good or default knobs.
    flags_problem = services.flags.problem()
    details = {"flags": f"{services.flags.name}: " + (f"degraded: {flags_problem}" if flags_problem else "ok")}
    return {
        "status": readiness_status(checks),
        "checks": checks,
        "details": details,
        "checked_at": datetime.now(UTC).isoformat(),
    }
