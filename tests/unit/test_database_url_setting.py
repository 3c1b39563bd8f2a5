"""DATABASE_URL is checked when the settings load: one line naming the variable, never its password.

A port that is no number was a bare `ValueError: invalid literal for int() with base 10: 'abc'` from
SQLAlchemy's URL parser, and a query parameter asyncpg does not know a `TypeError` from `asyncpg.connect()`,
both as tracebacks once the engines opened.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from pydantic import ValidationError

from app.config import Settings, describe_validation_error

if TYPE_CHECKING:
    from pathlib import Path

PASSWORD = "s3cretpw"


def refusal(url: str) -> str:
    """The line `poimen` prints for `DATABASE_URL=url`."""
    with pytest.raises(ValidationError) as raised:
        Settings(_env_file=None, database_url=url)  # type: ignore[call-arg]
    line = describe_validation_error(raised.value)
    assert line.startswith("invalid configuration: DATABASE_URL: "), line
    assert PASSWORD not in line
    return line


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql://u:{PASSWORD}@db:abc/app",
        f"postgresql://u:{PASSWORD}@db:70000/app",
        f"postgresql://u:{PASSWORD}@db:0/app",
        f"postgresql://u:{PASSWORD}@db:5432/app?port=x",
        # No @: SQLAlchemy reads `u` as the host and the password as the port.
        f"postgresql://u:{PASSWORD}/app",
    ],
)
def test_a_port_that_is_no_port_number_is_refused_without_showing_the_url(url: str) -> None:
    assert "the port is not a number from 1 to 65535" in refusal(url)


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("foo=bar", "unknown query parameter 'foo'"),
        ("sslmod=require", "unknown query parameter 'sslmod' (did you mean sslmode?)"),
        ("SSLMODE=require", "unknown query parameter 'SSLMODE' (did you mean sslmode?)"),
        ("options=-c%20search_path%3Dx", "unknown query parameter 'options'"),
        (
            "sslmode=required",
            "sslmode='required' is not one of disable, allow, prefer, require, verify-ca, verify-full",
        ),
        ("ssl=true", "ssl='true' is not one of disable, allow, prefer, require, verify-ca, verify-full"),
        ("sslmode=", "sslmode='' is not one of"),
        ("sslmode=require&ssl=require", "sslmode and ssl say the same: set one"),
        ("sslmode=require&sslmode=disable", "query parameter 'sslmode' is given twice"),
        ("sslrootcert=/nonexistent/ca.crt", "sslrootcert=/nonexistent/ca.crt names no readable file"),
    ],
)
def test_a_query_asyncpg_would_not_understand_is_refused_naming_the_parameter(query: str, says: str) -> None:
    line = refusal(f"postgresql://u:{PASSWORD}@db:5432/app?{query}")

    assert says in line


def test_libpq_parameters_asyncpg_reads_are_accepted(tmp_path: Path) -> None:
    certificate = tmp_path / "ca.crt"
    certificate.write_text("not parsed here")
    accepted = [
        f"postgresql://u:{PASSWORD}@db:5432/app?sslmode=verify-full&sslrootcert={certificate}",
        f"postgres://u:{PASSWORD}@db/app?ssl=require",
        "postgresql+asyncpg://postgres:@/postgres?host=/run/postgresql",
        f"postgresql://u:{PASSWORD}@db:5432/app?target_session_attrs=read-write&sslmode=disable",
        f"postgresql://u:{PASSWORD}@db:/app",
        f"postgresql://u:{PASSWORD}@/app?host=db1,db2&port=5432,5433",
    ]

    for url in accepted:
        assert Settings(_env_file=None, database_url=url).database_url == url  # type: ignore[call-arg]


@pytest.mark.parametrize("mode", ["disable", "allow", "prefer", "require", "verify-ca", "verify-full"])
def test_every_libpq_sslmode_is_accepted(mode: str) -> None:
    url = f"postgresql://u:{PASSWORD}@db:5432/app?sslmode={mode}"

    assert Settings(_env_file=None, database_url=url).database_url == url  # type: ignore[call-arg]
