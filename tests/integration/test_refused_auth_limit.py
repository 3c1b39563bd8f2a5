"""Refused authentications are limited per client address as uvicorn reports it, behind a proxy or not.

Real processes: `poimen serve` with AUTH_MODE=jwt, called over loopback. uvicorn takes the client address
from `X-Forwarded-For` only when the peer is a proxy it trusts (`FORWARDED_ALLOW_IPS`, by default the
loopback addresses these requests come from), so the header makes each request a client of its own here,
and changes nothing once loopback is not trusted.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import httpx
import jwt
import pytest

if TYPE_CHECKING:
    from collections.abc import Callable

    from tests.integration.conftest import ServiceProcess

pytestmark = pytest.mark.integration

SECRET = "refused-auth-tests-secret-of-32-bytes-at-least"
LIMITED = {
    "AUTH_MODE": "jwt",
    "JWT_SECRET": SECRET,
    "RATE_LIMIT_REFUSED_AUTH_PER_ADDRESS_RPS": "0.001",  # one refusal per 1,000 s after the burst
    "RATE_LIMIT_REFUSED_AUTH_BURST": "1",
}


def token(secret: str = SECRET) -> str:
    claims = {"sub": "tenant", "exp": int(time.time()) + 600, "projects": "*", "scope": "search"}
    return jwt.encode(claims, secret, algorithm="HS256")


def stats_status(service: ServiceProcess, *, forwarded_for: str, secret: str) -> int:
    headers = {"authorization": f"Bearer {token(secret)}", "x-forwarded-for": forwarded_for}
    return httpx.get(f"{service.url}/v1/projects/notes", headers=headers, timeout=10.0).status_code


WRONG = "a-key-the-service-does-not-hold-of-32-bytes"


def test_each_client_behind_a_trusted_proxy_has_its_own_refusals(
    poimen_service: Callable[..., ServiceProcess],
) -> None:
    service = poimen_service(**LIMITED)

    first = stats_status(service, forwarded_for="203.0.113.7", secret=WRONG)
    again = stats_status(service, forwarded_for="203.0.113.7", secret=WRONG)
    valid_there = stats_status(service, forwarded_for="203.0.113.7", secret=SECRET)
    other_client = stats_status(service, forwarded_for="203.0.113.8", secret=WRONG)

    assert (first, again, valid_there, other_client) == (401, 429, 200, 401)


def test_a_forwarded_for_header_from_an_untrusted_peer_does_not_make_a_new_client(
    poimen_service: Callable[..., ServiceProcess],
) -> None:
    service = poimen_service(**LIMITED, FORWARDED_ALLOW_IPS="192.0.2.1")  # the proxy is elsewhere: not loopback

    first = stats_status(service, forwarded_for="203.0.113.7", secret=WRONG)
    forged = stats_status(service, forwarded_for="203.0.113.8", secret=WRONG)

    assert (first, forged) == (401, 429)
