"""`JWT_MAX_LIFETIME_S`: a token valid for longer than the service accepts is refused, however it is signed.

The lifetime is `exp - iat` when the token has `iat`, else `exp - now` (with `JWT_LEEWAY_S` for the issuer's
clock). A token with `exp` 100 years ahead, or one so far ahead no date holds it, was accepted: a leaked one
never stopped working.
"""

from __future__ import annotations

import time

import jwt
import pytest

from app.auth.tokens import TokenVerifier
from app.config import ConfigurationError, Settings, load_settings
from tests.unit.test_auth import AUDIENCE, ISSUER, SECRET, assert_refused, bearer, claims

HOUR_S = 3600
DAY_S = 24 * HOUR_S
LEEWAY_S = 30


def verifier(max_lifetime_s: float = HOUR_S) -> TokenVerifier:
    return TokenVerifier.from_hs256_secret(
        SECRET, issuer=ISSUER, audience=AUDIENCE, leeway_s=LEEWAY_S, max_lifetime_s=max_lifetime_s
    )


def token(**overrides: object) -> str:
    return jwt.encode(claims(**overrides), SECRET, algorithm="HS256")


@pytest.mark.parametrize("lifetime_s", [100 * 365 * DAY_S, 10**30, HOUR_S + 1])
def test_a_token_issued_for_longer_than_the_maximum_is_refused(lifetime_s: int) -> None:
    now = int(time.time())

    assert_refused(verifier(), bearer(token(iat=now, exp=now + lifetime_s)), "lives longer than the 3600 s")


def test_a_token_without_iat_expiring_further_than_the_maximum_is_refused() -> None:
    now = int(time.time())

    assert_refused(verifier(), bearer(token(iat=None, exp=now + 100 * 365 * DAY_S)), "exp - now")


def test_a_token_of_exactly_the_maximum_lifetime_is_accepted() -> None:
    now = int(time.time())

    assert verifier().verify(bearer(token(iat=now, exp=now + HOUR_S))).subject == "agent-7"


def test_the_lifetime_is_counted_from_iat_not_from_now() -> None:
    # Issued 50 minutes ago for 2 hours: 70 minutes left, but the token was made to live 2 hours.
    now = int(time.time())
    old = token(iat=now - 50 * 60, exp=now + 70 * 60)

    assert_refused(verifier(), bearer(old), "exp - iat")


def test_a_token_without_iat_within_the_maximum_and_the_leeway_is_accepted() -> None:
    now = int(time.time())

    assert verifier().verify(bearer(token(iat=None, exp=now + HOUR_S + LEEWAY_S - 5))).subject == "agent-7"


def test_the_default_maximum_is_a_day() -> None:
    # Auth0's default API token lifetime is exactly a day; Keycloak, Okta, Entra ID and Cognito default to less.
    assert Settings().jwt_max_lifetime_s == DAY_S


@pytest.mark.parametrize("value", ["0", "-1", "inf", "31622401"])  # the most: 366 days
def test_a_maximum_lifetime_out_of_range_is_refused_at_start(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("JWT_MAX_LIFETIME_S", value)

    with pytest.raises(ConfigurationError, match="JWT_MAX_LIFETIME_S"):
        load_settings()


def test_the_setting_reaches_the_verifier() -> None:
    settings = Settings(auth_mode="jwt", jwt_secret=SECRET, jwt_max_lifetime_s=600)
    now = int(time.time())

    assert_refused(TokenVerifier.from_settings(settings), bearer(token(iat=now, exp=now + 601)), "600 s")
