"""Servers for the client's tests: `poimen serve` on the embedded default (auth off, AUTH_MODE=jwt) and a scripted one.

One service of each kind per test session (started on first use); tests keep apart by project id. The
scripted loopback server (`server`) is fresh for each test.
"""

from __future__ import annotations

import contextlib
import time
from typing import TYPE_CHECKING, Any

import jwt
import pytest

from tests.client.scripted_server import scripted_server
from tests.integration.conftest import ServiceProcess, fresh_data_dir, spawn_service

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

    from tests.client.scripted_server import ScriptedServer

try:
    import poimen_client  # noqa: F401 - only checks that the package is installed
except ImportError as error:  # pragma: no cover - a set-up problem, said plainly
    msg = "poimen-client is not installed in this venv: run `make install` (pip install -e clients/python)"
    raise ImportError(msg) from error

JWT_SECRET = "client-tests-secret-of-at-least-32-bytes"


@contextlib.contextmanager
def live_service(log_path: Path, **overrides: str) -> Iterator[ServiceProcess]:
    """A ready `poimen serve` on a fresh embedded data directory; stopped on exit."""
    with fresh_data_dir() as data_dir:
        service = spawn_service(data_dir, log_path=log_path, **overrides)
        try:
            service.wait_ready()
            yield service
        finally:
            service.stop()


@pytest.fixture(scope="session")
def service_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Base URL of a live service with auth off."""
    with live_service(tmp_path_factory.mktemp("client-service") / "serve.log") as service:
        yield service.url


@pytest.fixture(scope="session")
def jwt_service_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Base URL of a live service with AUTH_MODE=jwt (HS256, `JWT_SECRET`)."""
    log_path = tmp_path_factory.mktemp("client-jwt-service") / "serve.log"
    with live_service(log_path, AUTH_MODE="jwt", JWT_SECRET=JWT_SECRET) as service:
        yield service.url


@pytest.fixture(scope="session")
def make_token() -> Callable[..., str]:
    """`make_token(projects=["p"], scope="search", expires_in_s=300, subject="agent")`: an HS256 JWT."""

    def make(
        *, projects: list[str] | str = "*", scope: str = "search ingest admin", expires_in_s: float = 300.0
    ) -> str:
        claims: dict[str, Any] = {
            "sub": "client-tests",
            "exp": int(time.time() + expires_in_s),
            "projects": projects,
            "scope": scope,
        }
        return jwt.encode(claims, JWT_SECRET, algorithm="HS256")

    return make


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    """A loopback server answering from `server.script`, recording each request in `server.arrivals`."""
    with scripted_server() as scripted:
        yield scripted
