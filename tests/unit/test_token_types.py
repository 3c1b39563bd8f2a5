"""The `typ` header: only access tokens are accepted (RFC 8725 §3.11, RFC 9068 §4).

An identity provider signs several kinds of JWT with the same keys, issuer and often audience: ID tokens,
logout tokens (`logout+jwt`), security event tokens (`secevent+jwt`), DPoP proofs (`dpop+jwt`). Any of them
with the claims this service reads was served as a caller's access token.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging

import jwt
import pytest

from app.auth.tokens import TokenVerifier
from app.config import Settings
from tests.unit.test_auth import SECRET, assert_refused, b64url, bearer, claims, hs_verifier


def typed(typ: object) -> str:
    """An HS256 token with this `typ` signed by hand: PyJWT leaves out a `typ` of "" or None."""
    header = b64url(json.dumps({"alg": "HS256", "typ": typ}).encode())
    body = b64url(json.dumps(claims()).encode())
    signature = hmac.new(SECRET.encode(), f"{header}.{body}".encode(), hashlib.sha256).digest()
    return f"{header}.{body}.{b64url(signature)}"


@pytest.mark.parametrize(
    "typ",
    [
        "logout+jwt",  # OpenID Connect back-channel logout token
        "secevent+jwt",  # RFC 8417 security event token
        "dpop+jwt",  # RFC 9449 DPoP proof
        "application/dpop+jwt",
        "JOSE",  # a JWS, not said to be a JWT
        "token-introspection+jwt",  # RFC 9701 introspection response
    ],
)
def test_a_token_of_another_kind_is_refused_naming_the_typ_header(typ: str) -> None:
    assert_refused(hs_verifier(), bearer(typed(typ)), "'typ' header")


@pytest.mark.parametrize("typ", [5, ["at+jwt"], "", None])
def test_a_typ_header_that_is_not_a_media_type_is_refused(typ: object) -> None:
    assert_refused(hs_verifier(), bearer(typed(typ)), "malformed 'typ' header")


@pytest.mark.parametrize(
    "typ", ["JWT", "jwt", "application/jwt", "at+jwt", "AT+JWT", "application/at+jwt", "Application/At+JWT"]
)
def test_an_access_token_type_is_accepted_in_any_case_with_or_without_application(typ: str) -> None:
    assert hs_verifier().verify(bearer(typed(typ))).subject == "agent-7"


def test_a_token_without_typ_is_accepted() -> None:
    token = jwt.encode(claims(), SECRET, algorithm="HS256", headers={"typ": None})

    assert "typ" not in jwt.get_unverified_header(token)
    assert hs_verifier().verify(bearer(token)).subject == "agent-7"


def test_jwt_without_an_audience_warns_at_start_that_any_applications_token_is_accepted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # An ID token says `typ: JWT` like an access token: only `aud` tells it (or another API's token) apart.
    caplog.set_level(logging.WARNING, logger="poimen.auth")

    TokenVerifier.from_settings(Settings(auth_mode="jwt", jwt_secret=SECRET))
    TokenVerifier.from_settings(Settings(auth_mode="jwt", jwt_secret=SECRET, jwt_audience="poimen"))
    TokenVerifier.from_settings(Settings(auth_mode="off"))

    warnings = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "without JWT_AUDIENCE" in warnings[0]
