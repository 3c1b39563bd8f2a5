"""What `DATABASE_URL` may hold, checked when the settings load: one line naming the problem.

Never the value itself in a message: it may hold a password.
"""

from __future__ import annotations

from typing import Final

POSTGRESQL_URL_SCHEMES: Final = frozenset({"postgresql", "postgres", "postgresql+asyncpg"})
"""What `DATABASE_URL` may start with: the service and its migrations speak asyncpg, and take the plain forms as it."""
EXAMPLE: Final = "postgresql://user:password@host:5432/database"


def database_url_problem(url: str) -> str | None:
    """Why `url` (stripped) cannot be the service's `DATABASE_URL`, or None."""
    scheme = url.split("://", 1)[0].lower() if "://" in url else None
    if scheme is None or scheme not in POSTGRESQL_URL_SCHEMES:
        got = "no scheme" if scheme is None else f"the scheme {scheme!r}"
    elif any(character.isspace() for character in url):
        got = "a space inside it"
    else:
        return None
    return f"expected a PostgreSQL URL such as {EXAMPLE}, got {got}"
