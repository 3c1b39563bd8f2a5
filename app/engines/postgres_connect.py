"""SQLAlchemy `AsyncEngine`s over asyncpg from a libpq-style URL: every engine of the service is made here.

SQLAlchemy's asyncpg dialect hands each query parameter of the URL to `asyncpg.connect()` as a keyword
argument, and asyncpg knows none of libpq's (`sslmode=require` ended the service's start with `TypeError:
connect() got an unexpected keyword argument 'sslmode'`). asyncpg reads them from a DSN, as libpq does
(sslmode, sslrootcert, sslcert, ..., and the environment's PGSSLMODE/PGSSLROOTCERT where the URL says
nothing): the query goes to it as the DSN `postgresql://?<query>`, the rest of the URL as SQLAlchemy's
keyword arguments (which take precedence over a DSN's). `ssl=<mode>` (SQLAlchemy's documented spelling) is
read as `sslmode`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlencode

from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

if TYPE_CHECKING:
    from collections.abc import Mapping

    from sqlalchemy.engine import URL
    from sqlalchemy.ext.asyncio import AsyncEngine

ASYNCPG_DRIVER: Final = "postgresql+asyncpg"
PLAIN_SCHEMES: Final = frozenset({"postgresql", "postgres"})
"""Schemes taken as asyncpg: SQLAlchemy would otherwise load psycopg for them (not installed)."""


def asyncpg_url(url: str) -> tuple[URL, str | None]:
    """The SQLAlchemy URL (asyncpg, without a query) and the DSN carrying the query for asyncpg, if any."""
    parsed = make_url(url)
    if parsed.drivername in PLAIN_SCHEMES:
        parsed = parsed.set(drivername=ASYNCPG_DRIVER)
    parameters = [
        ("sslmode" if name == "ssl" else name, value)
        for name, values in parsed.query.items()
        for value in ((values,) if isinstance(values, str) else values)
    ]
    dsn = f"postgresql://?{urlencode(parameters)}" if parameters else None
    return parsed.set(query={}), dsn


def create_asyncpg_engine(
    url: str, *, connect_args: Mapping[str, Any] | None = None, **engine_options: object
) -> AsyncEngine:
    """`create_async_engine` for `url`, its query parameters read by asyncpg as libpq's (`asyncpg_url`).

    `url` may be `postgresql://`, `postgres://` or `postgresql+asyncpg://`; `connect_args` and
    `engine_options` are SQLAlchemy's.
    """
    engine_url, dsn = asyncpg_url(url)
    arguments = dict(connect_args or {})
    if dsn is not None:
        arguments["dsn"] = dsn
    return create_async_engine(engine_url, connect_args=arguments, **engine_options)
