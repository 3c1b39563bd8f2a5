"""Translation of PostgreSQL driver errors (asyncpg, SQLAlchemy) into the domain error tree.

The one place that knows them: a statement the server cancelled (`statement_timeout`) or a client
timeout becomes `EngineTimeoutError`, anything else the driver raises `EngineUnavailableError`.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, Final

import asyncpg
from sqlalchemy import exc as sqlalchemy_errors

from app.domain.errors import EngineStorageFullError, EngineTimeoutError, EngineUnavailableError, SearchServiceError

if TYPE_CHECKING:
    from collections.abc import Iterator

QUERY_CANCELED_SQLSTATE: Final = "57014"
"""statement_timeout or a cancel request: the engine was too slow, not gone."""
TLS_REFUSED: Final = "rejected SSL upgrade"
"""asyncpg's words when a server answers `sslmode=require` (or stricter) with "no TLS here"."""
DISK_FULL_SQLSTATE: Final = "53100"
"""No space left on the database's disk: writes fail until an operator frees or adds space."""


@contextmanager
def translate_errors(*, engine: str) -> Iterator[None]:
    """Re-raise driver errors as `EngineTimeoutError` (too slow) or `EngineUnavailableError` (anything else).

    Our own `SearchServiceError`s and cancellation pass through unchanged.
    """
    try:
        yield
    except SearchServiceError:
        raise
    except (TimeoutError, sqlalchemy_errors.TimeoutError) as error:
        message = f"{engine} did not answer in time"
        raise EngineTimeoutError(message, engine=engine) from error
    # InternalClientError (not an InterfaceError): a connection caught mid-operation as its server died
    # ("cannot switch to state 11; another operation is in progress") was a 500 on the search it served.
    except (
        sqlalchemy_errors.SQLAlchemyError,
        asyncpg.PostgresError,
        asyncpg.InterfaceError,
        asyncpg.InternalClientError,
        OSError,
    ) as error:
        if _was_cancelled_by_server(error):
            message = f"{engine} cancelled the statement (timeout)"
            raise EngineTimeoutError(message, engine=engine) from error
        if sqlstate_in_chain(error, DISK_FULL_SQLSTATE):
            # Answered 503 "retry in 1 s" with the file PostgreSQL could not extend; clients retried for ever.
            message = f"{engine} has no space left on its disk: nothing can be written until space is freed"
            raise EngineStorageFullError(message, engine=engine) from error
        if TLS_REFUSED in str(error):
            message = (
                f"{engine} does not offer TLS, and the connection insists on it (sslmode=require, verify-ca or"
                f" verify-full: DATABASE_URL or PGSSLMODE): {_first_line(error)}"
            )
            raise EngineUnavailableError(message, engine=engine) from error
        message = f"{engine} failed: {type(error).__name__}: {_first_line(error)}"
        raise EngineUnavailableError(message, engine=engine) from error


def _was_cancelled_by_server(error: BaseException) -> bool:
    return sqlstate_in_chain(error, QUERY_CANCELED_SQLSTATE)  # asyncpg's QueryCanceledError carries it too


def sqlstate_in_chain(error: BaseException, sqlstate: str) -> bool:
    """Whether `error`, or an error it wraps (`__cause__`, SQLAlchemy's `orig`), is PostgreSQL's `sqlstate`."""
    cause: BaseException | None = error
    while cause is not None:
        if getattr(cause, "sqlstate", None) == sqlstate:
            return True
        cause = cause.__cause__ or getattr(cause, "orig", None)
    return False


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [""])[0][:200]
