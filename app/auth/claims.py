"""The header and claims of a verified JWT read into what a `Principal` holds, each bad one refused naming it.

PyJWT has checked the signature, the algorithm and the registered claims it knows (`exp`, `nbf`, `iss`,
`aud`) before these run; what is left is what it lets through: the `typ` header, the time claims' types, a
blank or non-string `sub`, and this service's own `projects` and `scope` claims. Two it checks are checked
here first, for a reason naming them: the `crit` header (before the signature, as PyJWT does) and an `iat` in
the future. Messages never quote the token.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import TYPE_CHECKING, Any, Final, NoReturn

from app.domain.errors import AuthenticationError

if TYPE_CHECKING:
    from collections.abc import Iterable

ALL_PROJECTS: Final = "*"
ACCESS_TOKEN_TYPES: Final = frozenset({"jwt", "at+jwt"})
"""`typ` values of an access token, lowercased and without `application/` (RFC 7515 §4.1.9 allows either).

`at+jwt` is RFC 9068's; `JWT` (or none) is what most identity providers put on access tokens. OpenID
Connect ID tokens mostly say `JWT` too: the audience (`JWT_AUDIENCE`) is what refuses those."""


UNDERSTOOD_CRITICAL_EXTENSIONS: Final = frozenset({"b64"})
"""Header extensions a token may mark critical (`crit`): RFC 7797's, the one PyJWT implements."""


def unverified_header(token: str) -> dict[str, Any]:
    """The JOSE header of `token`, decoded but not verified: read for the checks made before the signature's."""
    segment = token.split(".", 1)[0]
    try:
        header = json.loads(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)))
    except (binascii.Error, ValueError):  # bad base64, UTF-8 or JSON alike
        header = None
    if not isinstance(header, dict):
        msg = "the bearer token is not a well-formed JWT"
        raise AuthenticationError(msg)
    return header


def check_critical_extensions(header: dict[str, Any]) -> None:
    """Refuse a token marking critical (`crit`) a header extension this service does not support (RFC 7515 §4.1.11).

    PyJWT refuses the same tokens, with a reason that named nothing ("the bearer token is invalid", or "not a
    well-formed JWT" when the `kid` picks the key): the issuer could not tell what to change.
    """
    if "crit" not in header:
        return
    crit = header["crit"]
    if not isinstance(crit, list) or not crit or not all(isinstance(name, str) for name in crit):
        msg = "the bearer token has a malformed 'crit' header (a non-empty list of names)"
        raise AuthenticationError(msg)
    if not UNDERSTOOD_CRITICAL_EXTENSIONS.issuperset(crit):
        msg = "the bearer token's 'crit' header names an extension this service does not support"
        raise AuthenticationError(msg)


def check_token_type(header: dict[str, Any]) -> None:
    """Refuse a token whose `typ` header names another kind of JWT than an access token (RFC 8725 §3.11).

    A logout token (`logout+jwt`), a security event (`secevent+jwt`) or a DPoP proof (`dpop+jwt`) of the same
    issuer is signed with the same keys and may carry the same `sub`, `aud` and `exp`: without this check it
    was served as its subject's access token. No `typ` at all is accepted (RFC 7519 makes it optional).
    """
    if "typ" not in header:
        return
    typ = header["typ"]
    if not isinstance(typ, str) or not typ:
        msg = "the bearer token has a malformed 'typ' header"
        raise AuthenticationError(msg)
    media_type = typ.lower().removeprefix("application/")  # media types are case-insensitive (RFC 2045)
    if media_type not in ACCESS_TOKEN_TYPES:
        msg = "the bearer token's 'typ' header names another kind of token than an access token (JWT or at+jwt)"
        raise AuthenticationError(msg)


def check_time_claims(claims: dict[str, Any]) -> None:
    """Refuse an `exp`, `nbf` or `iat` that is not a number (RFC 7519 NumericDate)."""
    for claim in ("exp", "nbf", "iat"):
        # PyJWT took `"exp": "99999999999"` (a string) and compared its int().
        value = claims.get(claim)
        if claim in claims and (isinstance(value, bool) or not isinstance(value, (int, float))):
            malformed(claim)


def check_issued_at(claims: dict[str, Any], *, leeway_s: float, now_s: float) -> None:
    """Refuse an `iat` more than `leeway_s` in the future: the issuer's clock, or the token, is wrong.

    PyJWT's own check gave the reason of a future `nbf` ("not valid yet"), sending the issuer looking at `nbf`.
    """
    if "iat" in claims and claims["iat"] > now_s + leeway_s:
        msg = "the bearer token's 'iat' claim is in the future"
        raise AuthenticationError(msg)


def check_lifetime(claims: dict[str, Any], *, max_lifetime_s: float, leeway_s: float, now_s: float) -> None:
    """Refuse a token valid for longer than `max_lifetime_s` (`JWT_MAX_LIFETIME_S`).

    The lifetime is `exp - iat` when the token says when it was issued (`check_issued_at` has refused an `iat`
    in the future), else `exp - now`, which allows `leeway_s` for an issuer's clock running ahead. `exp` 100 years
    ahead, or past any date (`10**30`), was accepted: a leaked token never stopped working.
    """
    if "iat" in claims:
        if claims["exp"] - claims["iat"] > max_lifetime_s:
            _too_long(max_lifetime_s, "exp - iat")
    elif claims["exp"] - now_s > max_lifetime_s + leeway_s:
        _too_long(max_lifetime_s, "exp - now, the token has no iat")


def _too_long(max_lifetime_s: float, measured: str) -> NoReturn:
    msg = f"the bearer token lives longer than the {max_lifetime_s:.0f} s this service accepts ({measured})"
    raise AuthenticationError(msg)


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
