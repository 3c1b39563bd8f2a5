"""The `Authorization` header as `poimen serve` reads it off the wire (AUTH_MODE=jwt, over loopback).

The in-process test client joins two `Authorization` lines into one ("Bearer a, Bearer b"), so what a
request with two of them gets is checked here, on raw HTTP/1.1 sent to the real server.
"""

from __future__ import annotations

import socket
import time
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import jwt
import pytest

if TYPE_CHECKING:
    from collections.abc import Callable

    from tests.integration.conftest import ServiceProcess

pytestmark = pytest.mark.integration

SECRET = "authorization-headers-secret-of-32-bytes-at-least"
WRONG = "a-key-the-service-does-not-hold-of-32-bytes"
JWT_ENV = {"AUTH_MODE": "jwt", "JWT_SECRET": SECRET, "RATE_LIMIT_REFUSED_AUTH_PER_ADDRESS_RPS": "0"}


def token(secret: str = SECRET, *, projects: list[str] | str = "*") -> str:
    claims = {"sub": "tenant", "exp": int(time.time()) + 600, "projects": projects, "scope": "search"}
    return jwt.encode(claims, secret, algorithm="HS256")


def raw_get(service: ServiceProcess, path: str, header_lines: list[str]) -> tuple[int, bytes]:
    """GET `path` with these header lines exactly as written; the status and the body."""
    address = urlsplit(service.url)
    request = f"GET {path} HTTP/1.1\r\nHost: {address.netloc}\r\nConnection: close\r\n"
    request += "".join(f"{line}\r\n" for line in header_lines) + "\r\n"
    with socket.create_connection((address.hostname, address.port), timeout=30) as connection:
        connection.sendall(request.encode())
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


def test_a_request_with_two_authorization_headers_is_refused_whichever_comes_first(
    poimen_service: Callable[..., ServiceProcess],
) -> None:
    # The first line was read and the second ignored: a gateway in front that checked the other one let through
    # a caller the service then served as someone else.
    service = poimen_service(**JWT_ENV)
    valid, forged, narrower = token(), token(WRONG), token(projects=["other"])
    stats = "/v1/projects/notes"

    single = raw_get(service, stats, [f"Authorization: Bearer {valid}"])
    doubled = [
        raw_get(service, stats, [f"Authorization: Bearer {first}", f"Authorization: Bearer {second}"])
        for first, second in ((valid, forged), (forged, valid), (valid, narrower), (valid, valid))
    ]

    assert single[0] == 200
    assert [status for status, _ in doubled] == [401] * 4
    for _, body in doubled:
        assert b"the request has more than one Authorization header" in body
