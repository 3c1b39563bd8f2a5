"""PostgreSQL driver errors become the domain's: a timeout is `EngineTimeoutError`, anything else unavailability."""

from __future__ import annotations

import asyncpg
import pytest

from app.domain.errors import EngineTimeoutError, EngineUnavailableError, InvalidInputError
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
