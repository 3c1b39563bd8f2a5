"""PostgreSQL driver errors become the domain's: a timeout is `EngineTimeoutError`, anything else unavailability."""

from __future__ import annotations

from types import SimpleNamespace

import asyncpg
import pytest
from sqlalchemy.exc import DBAPIError

from app.api.errors import FAILURE_LOG_STATE_KEY, failure_log, service_error_handler
from app.domain.errors import EngineStorageFullError, EngineTimeoutError, EngineUnavailableError, InvalidInputError
from app.engines.postgres_errors import translate_errors


@pytest.mark.parametrize(
    "error",
    [
        asyncpg.InternalClientError("cannot switch to state 11; another operation (2) is in progress"),
        asyncpg.InterfaceError("connection is closed"),
        ConnectionRefusedError(111, "Connection refused"),
    ],
)
def test_a_connection_lost_mid_operation_is_the_engine_unavailable(error: Exception) -> None:
    with pytest.raises(EngineUnavailableError, match=type(error).__name__), translate_errors(engine="postgres"):
        raise error


def test_a_timeout_is_a_timeout_and_the_domains_own_errors_pass_through() -> None:
    with pytest.raises(EngineTimeoutError), translate_errors(engine="postgres"):
        raise TimeoutError
    with pytest.raises(InvalidInputError), translate_errors(engine="postgres"):
        raise InvalidInputError("bad", field="x")


def test_a_full_disk_is_its_own_error_whether_the_driver_or_sqlalchemy_raised_it() -> None:
    disk_full = asyncpg.DiskFullError('could not extend file "base/5/16738": No space left on device')
    wrapped = DBAPIError("INSERT INTO chunks ...", {}, disk_full)

    for error in (disk_full, wrapped):
        with pytest.raises(EngineStorageFullError) as raised, translate_errors(engine="postgres"):
            raise error
        assert raised.value.engine == "postgres"
        assert "base/5" not in raised.value.message  # the file it could not extend is the operator's, not the caller's


def test_a_full_disk_answers_507_without_retry_after() -> None:
    request = SimpleNamespace(
        method="POST",
        scope={"raw_path": b"/v1/projects/p/documents"},
        app=SimpleNamespace(state={FAILURE_LOG_STATE_KEY: failure_log()}),
    )

    response = service_error_handler(request, EngineStorageFullError("postgres has no space left", engine="postgres"))

    assert response.status_code == 507
    assert "retry-after" not in {name.lower() for name in response.headers}
