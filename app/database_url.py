"""What `DATABASE_URL` may hold, checked when the settings load: one line naming the problem.

Never the value itself in a message: it may hold a password. The URL is split as SQLAlchemy's `make_url`
splits it (`app/engines/postgres_connect.py` opens it with that), so what passes here parses there; its
query parameters are libpq's, as asyncpg reads them from a DSN (the query goes to asyncpg as one).
"""

from __future__ import annotations

import difflib
import os
import re
from pathlib import Path
from typing import Final
from urllib.parse import parse_qsl

POSTGRESQL_URL_SCHEMES: Final = frozenset({"postgresql", "postgres", "postgresql+asyncpg"})
"""What `DATABASE_URL` may start with: the service and its migrations speak asyncpg, and take the plain forms as it."""
EXAMPLE: Final = "postgresql://user:password@host:5432/database"
SSL_MODES: Final = ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")
"""libpq's `sslmode` values, which asyncpg takes as they are."""
QUERY_PARAMETERS: Final = frozenset(
    {
        "host",
        "port",
        "dbname",
        "user",
        "password",
        "passfile",
        "sslmode",
        "ssl",  # SQLAlchemy's spelling of sslmode (its asyncpg documentation's `?ssl=require`)
        "sslrootcert",
        "sslcert",
        "sslkey",
        "sslcrl",
        "sslpassword",
        "sslnegotiation",
        "ssl_min_protocol_version",
        "ssl_max_protocol_version",
        "target_session_attrs",
        "krbsrvname",
        "gsslib",
    }
)
"""The libpq parameters asyncpg reads from a DSN's query. It takes any other for a server setting, which the
server refuses, if at all, only when it is asked for a connection."""
FILE_PARAMETERS: Final = ("sslrootcert", "sslcert", "sslkey", "sslcrl")
"""Parameters that name a file the connection reads: one that is not there fails every connection."""
MAX_PORT: Final = 65535

# SQLAlchemy's URL grammar (sqlalchemy.engine.url._parse_url), groups as it names them.
_SQLALCHEMY_URL: Final = re.compile(
    r"""
    (?P<name>[\w\+]+)://
    (?:(?P<username>[^:/]*)(?::(?P<password>[^@]*))?@)?
    (?:(?:\[(?P<ipv6host>[^/\?]+)\]|(?P<ipv4host>[^/:\?]+))?(?::(?P<port>[^/\?]*))?)?
    (?:/(?P<database>[^\?]*))?
    (?:\?(?P<query>.*))?
    """,
    re.VERBOSE,
)


def database_url_problem(url: str) -> str | None:
    """Why `url` (stripped) cannot be the service's `DATABASE_URL`, or None."""
    scheme = url.split("://", 1)[0].lower() if "://" in url else None
    if scheme is None or scheme not in POSTGRESQL_URL_SCHEMES:
        got = "no scheme" if scheme is None else f"the scheme {scheme!r}"
    elif any(character.isspace() for character in url):
        got = "a space inside it"
    else:
        parts = _SQLALCHEMY_URL.match(url)
        if parts is None:  # the grammar matches any `scheme://...`; kept for the type checker
            return f"expected a PostgreSQL URL such as {EXAMPLE}"
        return _port_problem(parts["port"]) or _query_problem(parts["query"] or "")
    return f"expected a PostgreSQL URL such as {EXAMPLE}, got {got}"


def _port_problem(port: str | None) -> str | None:
    # Not the port itself: with no `@` (a password with an unencoded `/` or `@`), what stands there is the password.
    if not port or (port.isascii() and port.isdigit() and 1 <= int(port) <= MAX_PORT):
        return None
    return (
        f"the port is not a number from 1 to {MAX_PORT} (the URL is not shown: it may hold a password); expected "
        f"{EXAMPLE}, with @ : / ? # % in the user name or password percent-encoded"
    )


def _query_problem(query: str) -> str | None:
    parameters: dict[str, str] = {}
    for name, value in parse_qsl(query, keep_blank_values=True):
        if name not in QUERY_PARAMETERS:
            close = difflib.get_close_matches(name.lower(), QUERY_PARAMETERS, n=1, cutoff=0.8)
            hint = f" (did you mean {close[0]}?)" if close else ""
            return (
                f"unknown query parameter {name!r}{hint}; asyncpg reads libpq's: {', '.join(sorted(QUERY_PARAMETERS))}"
            )
        if name in parameters:
            return f"the query parameter {name!r} is given twice"
        parameters[name] = value
    return _values_problem(parameters)


def _values_problem(parameters: dict[str, str]) -> str | None:
    if "sslmode" in parameters and "ssl" in parameters:
        return "sslmode and ssl say the same: set one"
    for name in ("sslmode", "ssl"):
        if name in parameters and parameters[name] not in SSL_MODES:
            return f"{name}={parameters[name]!r} is not one of {', '.join(SSL_MODES)}"
    # libpq's `port=5432,5433` goes with `host=a,b`: one port per host.
    for port in parameters.get("port", "1").split(","):
        problem = _port_problem(port or "-")
        if problem is not None:
            return problem
    for name in FILE_PARAMETERS:
        path = Path(parameters.get(name) or ".")
        if name in parameters and not (path.is_file() and os.access(path, os.R_OK)):
            return f"{name}={parameters[name]} names no readable file"
    return None
