"""The claims of a verified JWT read into what a `Principal` holds, each malformed one refused naming it.

PyJWT has checked the signature, the algorithm and the registered claims it knows (`exp`, `nbf`, `iat`,
`iss`, `aud`) before these run; what is left is what it lets through: the time claims' types, a blank or
non-string `sub`, and this service's own `projects` and `scope` claims. Messages never quote the token.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, NoReturn

from app.domain.errors import AuthenticationError

if TYPE_CHECKING:
    from collections.abc import Iterable

ALL_PROJECTS: Final = "*"


def check_time_claims(claims: dict[str, Any]) -> None:
    """Refuse an `exp`, `nbf` or `iat` that is not a number (RFC 7519 NumericDate)."""
    for claim in ("exp", "nbf", "iat"):
        # PyJWT took `"exp": "99999999999"` (a string) and compared its int().
        value = claims.get(claim)
        if claim in claims and (isinstance(value, bool) or not isinstance(value, (int, float))):
            malformed(claim)


def subject(claims: dict[str, Any]) -> str:
    """The caller's name; a blank `sub` names nobody.

    Refusals could not name the caller, and its rate limit fell back to the `X-Client-Id` the caller picks.
    """
    value = claims.get("sub")
    if not isinstance(value, str) or not value.strip():
        malformed("sub")
    return value


def granted_projects(value: object) -> frozenset[str] | None:
    """The projects a `projects` claim grants; None for every project (`"*"`, the whole claim)."""
    if value == ALL_PROJECTS:
        return None
    if value is None:
        return frozenset()  # a token naming no project reaches none
    # "*" in a list is refused, not read as a project's name: `["*"]` granted nothing, `["*", "a"]` only `a`.
    if not isinstance(value, list) or not all(isinstance(item, str) and item != ALL_PROJECTS for item in value):
        malformed("projects")
    return frozenset(value)


def granted_scopes(value: object) -> frozenset[str]:
    """The scopes of a `scope` claim: a space-separated string or a list of strings."""
    if value is None:
        return frozenset()
    items: Iterable[object] = value.split() if isinstance(value, str) else value if isinstance(value, list) else [None]
    if not all(isinstance(item, str) for item in items):
        malformed("scope")
    return frozenset(str(item) for item in items)


def malformed(claim: str) -> NoReturn:
    """Refuse the token for `claim`, naming it."""
    msg = f"the bearer token has a malformed {claim!r} claim"
    raise AuthenticationError(msg)
