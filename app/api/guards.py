"""Auth for every route: a guard verifies the bearer token and checks scope and project before the handler.

Every route handler carries exactly one of `search_guard`, `ingest_guard`, `admin_guard` or `public`
(`tests/api/test_route_guards.py` walks the app and fails on a route that has none), so a new handler
cannot be open to everyone by accident. A project named in the path or the query string is validated
and authorized here; one named in a JSON body is authorized by the handler with `authorize_project`.

A refused authentication (401, 403) spends a token of its client address's bucket
(`RATE_LIMIT_REFUSED_AUTH_PER_ADDRESS_RPS`): the per-caller limit keys on the verified subject, which a
refused request has not got, so a client sending bad tokens was never slowed. Past the bucket the refusal
is a 429 with `Retry-After` and `refused_status` (401 or 403) in its body, which tells a client not to send it
again as it is. Only refusals are counted and only refusals are turned away: a valid token is never limited
by it, so neither a token claiming a tenant's subject nor a flood from an address the tenant shares (a NAT,
an ingress whose forwarded-for uvicorn does not trust) locks the tenant out.
"""

from __future__ import annotations

import contextlib
import math
import re
from typing import TYPE_CHECKING, Any, Final

from app.api.overload import charge_caller
from app.auth.forwarding import forwarded_token
from app.auth.tokens import (
    ANONYMOUS,
    SCOPE_ADMIN,
    SCOPE_INGEST,
    SCOPE_SEARCH,
    Principal,
    authorize,
    authorize_scope,
)
from app.domain.errors import AuthenticationError, InvalidQueryError, PermissionDeniedError, RateLimitedError
from app.domain.project_ids import PROJECT_ID_PATTERN, PROJECT_ID_RULE
from app.observability.metrics import record_shed
from app.search.rollout import caller_key

if TYPE_CHECKING:
    from collections.abc import Iterator

    from litestar.connection import ASGIConnection
    from litestar.handlers.base import BaseRouteHandler
    from litestar.types import Guard

    from app.wiring.services import Services


PRINCIPAL_STATE_KEY: Final = "principal"
PROJECT_STATE_KEY: Final = "project"
"""The project a request names (path, query or body), once its id is well formed; read by the access log."""
PUBLIC_OPT_KEY: Final = "public"
SCOPE_OPT_KEY: Final = "scope"
_PROJECT_ID: Final = re.compile(PROJECT_ID_PATTERN)

public: Final = {PUBLIC_OPT_KEY: True}
"""`opt=public` marks a route that needs no token (probes, metrics, the OpenAPI document)."""


def check_project_id(project: str | None) -> str:
    """`project` if it is a valid project id; else `InvalidQueryError(field="project")`."""
    if not project:
        msg = "project is required"
        raise InvalidQueryError(msg, field="project")
    if not _PROJECT_ID.fullmatch(project):
        msg = f"project must be {PROJECT_ID_RULE}"
        raise InvalidQueryError(msg, field="project")
    return project


def _scope_guard(scope: str) -> Guard:
    def guard(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
        services: Services = connection.app.state.services
        with refusals_limited(connection):
            # The token first: a caller without one learns nothing, not even which project ids are well formed.
            principal = services.verifier.verify(connection.headers.getall("authorization", []))
            # Kept before authorizing: the access log names who was refused (a 403) and what they asked for.
            connection.state[PRINCIPAL_STATE_KEY] = principal
            project = connection.path_params.get("project") or connection.query_params.get("project")
            if project is not None:
                connection.state[PROJECT_STATE_KEY] = check_project_id(project)
                authorize(principal, project=project, scope=scope)
            else:
                authorize_scope(principal, scope=scope)
        caller = request_caller_key(connection, principal)
        if principal is not ANONYMOUS:  # without auth every caller is one: the process's limit is theirs
            charge_caller(connection.scope, caller)
        _within_rate(services, caller)
        if services.settings.opensearch_auth == "forward_jwt":
            forwarded_token.set(principal.token)

    guard.__name__ = f"{scope}_guard"
    guard.__qualname__ = guard.__name__
    return guard


search_guard: Final = _scope_guard(SCOPE_SEARCH)
ingest_guard: Final = _scope_guard(SCOPE_INGEST)
admin_guard: Final = _scope_guard(SCOPE_ADMIN)
GUARDS: Final = frozenset({search_guard, ingest_guard, admin_guard})


def request_caller_key(connection: ASGIConnection[Any, Any, Any, Any], principal: Principal) -> str:
    """Who is calling, for rollout stickiness and rate limits: JWT subject, else `X-Client-Id`, else address."""
    client = connection.client
    return caller_key(
        # With auth off everyone is ANONYMOUS: its subject would make every caller one.
        None if principal is ANONYMOUS else principal.subject,
        connection.headers.get("x-client-id"),
        client.host if client else None,
    )


def _within_rate(services: Services, key: str) -> None:
    """Raise `RateLimitedError` (429 + Retry-After) when `key` is over `RATE_LIMIT_PER_CALLER_RPS`."""
    knobs = services.flags.current()
    wait_s = services.rate_limit.take(key, rate_per_s=knobs.rate_limit_per_caller_rps, burst=knobs.rate_limit_burst)
    if wait_s > 0:
        record_shed("rate_limit")
        msg = f"more than {knobs.rate_limit_per_caller_rps:g} requests per second from this caller; retry shortly"
        raise RateLimitedError(msg, retry_after_s=max(1, math.ceil(wait_s)))


@contextlib.contextmanager
def refusals_limited(connection: ASGIConnection[Any, Any, Any, Any]) -> Iterator[None]:
    """Count a refused authentication against the client address; past its rate, `RateLimitedError` instead.

    The address is the one uvicorn reports: the peer's, or the `X-Forwarded-For` client's when the peer is a
    proxy uvicorn trusts (`FORWARDED_ALLOW_IPS`, uvicorn's default 127.0.0.1).
    """
    try:
        yield
    except (AuthenticationError, PermissionDeniedError) as refusal:
        services: Services = connection.app.state.services
        knobs = services.flags.current()
        client = connection.client
        wait_s = services.refused_auth_limit.take(
            client.host if client else "unknown",
            rate_per_s=knobs.rate_limit_refused_auth_per_address_rps,
            burst=knobs.rate_limit_refused_auth_burst,
        )
        if wait_s <= 0:
            raise
        record_shed("refused_auth")
        # The refusal's own reason (a fixed message, never the token) still tells a misconfigured client why.
        msg = f"too many refused authentications from this address; this request's: {refusal.message}"
        raise RateLimitedError(msg, retry_after_s=max(1, math.ceil(wait_s)), refusal=refusal) from None


def principal_of(connection: ASGIConnection[Any, Any, Any, Any]) -> Principal:
    """The caller the route's guard verified."""
    principal: Principal = connection.state[PRINCIPAL_STATE_KEY]
    return principal


def authorize_project(connection: ASGIConnection[Any, Any, Any, Any], project: str, *, scope: str) -> Principal:
    """For a project named in a body: check the guard's caller may use `scope` on it; return the caller."""
    principal = principal_of(connection)
    connection.state[PROJECT_STATE_KEY] = project
    with refusals_limited(connection):
        authorize(principal, project=project, scope=scope)
    return principal
