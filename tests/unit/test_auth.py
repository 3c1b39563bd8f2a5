"""JWT verification matrix at the verifier level (the HTTP-level matrix lives in tests/api)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import time
from typing import TYPE_CHECKING

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from app.auth.tokens import (
    ANONYMOUS,
    Principal,
    TokenVerifier,
    authorize,
    authorize_scope,
    cache_scope,
)
from app.config import ConfigurationError, Settings, load_settings
from app.domain.errors import AuthenticationError, PermissionDeniedError

if TYPE_CHECKING:
    from pathlib import Path

SECRET = "s" * 40
OTHER_SECRET = "o" * 40
ISSUER = "https://issuer.example"
AUDIENCE = "poimen"


@pytest.fixture(scope="module")
def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def other_rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def ec_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def public_pem(key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def claims(**overrides: object) -> dict[str, object]:
    now = int(time.time())
    values: dict[str, object] = {
        "sub": "agent-7",
        "projects": ["alpha", "beta"],
        "scope": "search ingest",
        "iss": ISSUER,
        "aud": AUDIENCE,
        "iat": now,
        "exp": now + 300,
    }
    values.update(overrides)
    return {key: value for key, value in values.items() if value is not None}


def bearer(token: str) -> str:
    return f"Bearer {token}"


def hs_verifier(**options: object) -> TokenVerifier:
    return TokenVerifier.from_hs256_secret(SECRET, issuer=ISSUER, audience=AUDIENCE, leeway_s=30, **options)


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def hand_signed_hs256(payload: dict[str, object], secret: bytes) -> str:
    """An HS256 JWT signed by hand: PyJWT refuses to use a PEM key as an HMAC secret, an attacker does not."""
    header = b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    body = b64url(json.dumps(payload).encode())
    signature = hmac.new(secret, f"{header}.{body}".encode(), hashlib.sha256).digest()
    return f"{header}.{body}.{b64url(signature)}"


def assert_refused(verifier: TokenVerifier, header: str | None, reason: str) -> None:
    with pytest.raises(AuthenticationError) as caught:
        verifier.verify(header)

    assert reason in caught.value.message
    token = (header or "").removeprefix("Bearer ").strip()
    if token:
        assert token not in str(caught.value)
    assert caught.value.__cause__ is None  # the PyJWT error (which may quote the token) is not chained


# --- the matrix (HS256) -------------------------------------------------------------------------


def test_no_header_is_refused() -> None:
    assert_refused(hs_verifier(), None, "bearer token is required")


def test_empty_bearer_is_refused() -> None:
    assert_refused(hs_verifier(), "Bearer   ", "bearer token is required")


def test_other_scheme_is_refused() -> None:
    assert_refused(hs_verifier(), "Basic dXNlcjpwYXNz", "Bearer scheme")


def test_garbage_token_is_refused() -> None:
    assert_refused(hs_verifier(), bearer("not-a-jwt"), "not a well-formed JWT")


def test_expired_token_is_refused() -> None:
    token = jwt.encode(claims(exp=int(time.time()) - 120), SECRET, algorithm="HS256")

    assert_refused(hs_verifier(), bearer(token), "expired")


def test_token_expired_within_the_leeway_is_accepted() -> None:
    token = jwt.encode(claims(exp=int(time.time()) - 5), SECRET, algorithm="HS256")

    assert hs_verifier().verify(bearer(token)).subject == "agent-7"


def test_not_yet_valid_token_is_refused() -> None:
    token = jwt.encode(claims(nbf=int(time.time()) + 600), SECRET, algorithm="HS256")

    assert_refused(hs_verifier(), bearer(token), "not valid yet")


def test_token_issued_in_the_future_is_refused_naming_iat() -> None:
    # PyJWT's reason was the one of a future `nbf`: "not valid yet", which sent the issuer looking at `nbf`.
    token = jwt.encode(claims(iat=int(time.time()) + 600, exp=int(time.time()) + 900), SECRET, algorithm="HS256")

    assert_refused(hs_verifier(), bearer(token), "the bearer token's 'iat' claim is in the future")


def test_token_issued_within_the_leeway_ahead_is_accepted() -> None:
    token = jwt.encode(claims(iat=int(time.time()) + 10), SECRET, algorithm="HS256")

    assert hs_verifier().verify(bearer(token)).subject == "agent-7"


def test_token_with_an_unknown_critical_header_extension_is_refused_naming_crit() -> None:
    # RFC 7515 §4.1.11: an extension the recipient must understand and does not is a refusal; PyJWT's
    # reason left the caller with "the bearer token is invalid".
    token = jwt.encode(claims(), SECRET, algorithm="HS256", headers={"crit": ["exp-ext"], "exp-ext": 1})

    assert_refused(hs_verifier(), bearer(token), "'crit' header names an extension this service does not support")


@pytest.mark.parametrize("crit", ["exp-ext", [], [5]])
def test_a_malformed_critical_header_is_refused_naming_crit(crit: object) -> None:
    token = jwt.encode(claims(), SECRET, algorithm="HS256", headers={"crit": crit})

    assert_refused(hs_verifier(), bearer(token), "malformed 'crit' header")


def test_token_signed_with_another_key_is_refused() -> None:
    token = jwt.encode(claims(), OTHER_SECRET, algorithm="HS256")

    assert_refused(hs_verifier(), bearer(token), "signature is invalid")


def test_alg_none_is_refused() -> None:
    token = jwt.encode(claims(), "", algorithm="none")

    assert_refused(hs_verifier(), bearer(token), "algorithm this service does not accept")


def test_other_hmac_algorithm_is_refused() -> None:
    token = jwt.encode(claims(), SECRET * 2, algorithm="HS512")

    assert_refused(hs_verifier(), bearer(token), "algorithm this service does not accept")


def test_wrong_audience_is_refused() -> None:
    token = jwt.encode(claims(aud="another-service"), SECRET, algorithm="HS256")

    assert_refused(hs_verifier(), bearer(token), "audience")


def test_wrong_issuer_is_refused() -> None:
    token = jwt.encode(claims(iss="https://evil.example"), SECRET, algorithm="HS256")

    assert_refused(hs_verifier(), bearer(token), "untrusted issuer")


def test_token_without_exp_is_refused() -> None:
    payload = claims()
    del payload["exp"]
    token = jwt.encode(payload, SECRET, algorithm="HS256")

    assert_refused(hs_verifier(), bearer(token), "lacks a required claim: exp")


def test_token_without_audience_is_refused_when_one_is_configured() -> None:
    payload = claims()
    del payload["aud"]
    token = jwt.encode(payload, SECRET, algorithm="HS256")

    assert_refused(hs_verifier(), bearer(token), "lacks a required claim: aud")


def test_issuer_and_audience_are_not_checked_when_not_configured() -> None:
    verifier = TokenVerifier.from_hs256_secret(SECRET)
    token = jwt.encode(claims(iss="anyone", aud="anything"), SECRET, algorithm="HS256")

    assert verifier.verify(bearer(token)).subject == "agent-7"


def test_valid_token_gives_its_principal() -> None:
    token = jwt.encode(claims(), SECRET, algorithm="HS256")

    principal = hs_verifier().verify(bearer(token))

    assert principal == Principal(
        subject="agent-7", projects=frozenset({"alpha", "beta"}), scopes=frozenset({"search", "ingest"}), token=token
    )
    assert token not in repr(principal)


def test_bearer_scheme_is_case_insensitive() -> None:
    token = jwt.encode(claims(), SECRET, algorithm="HS256")

    assert hs_verifier().verify(f"bearer {token}").token == token


def test_scope_may_be_a_list_and_projects_a_star() -> None:
    token = jwt.encode(claims(scope=["search"], projects="*"), SECRET, algorithm="HS256")

    principal = hs_verifier().verify(bearer(token))

    assert principal.projects is None
    assert principal.scopes == frozenset({"search"})


def test_missing_projects_claim_grants_no_project() -> None:
    token = jwt.encode(claims(projects=None), SECRET, algorithm="HS256")

    principal = hs_verifier().verify(bearer(token))

    assert principal.projects == frozenset()
    with pytest.raises(PermissionDeniedError):
        authorize(principal, project="alpha", scope="search")


@pytest.mark.parametrize(
    ("claim", "value"),
    [
        ("projects", "alpha"),
        ("projects", [1, 2]),
        # "*" is the whole claim or nothing: in a list it granted no project, silently (["*"]: none at all).
        ("projects", ["*"]),
        ("projects", ["*", "alpha"]),
        ("scope", 7),
        ("sub", ""),
        ("sub", "   "),
        ("sub", 5),  # PyJWT's own check answered "the bearer token is invalid", naming no claim
    ],
)
def test_malformed_claims_are_refused(claim: str, value: object) -> None:
    token = jwt.encode(claims(**{claim: value}), SECRET, algorithm="HS256")

    assert_refused(hs_verifier(), bearer(token), f"malformed {claim!r} claim")


# --- asymmetric keys and algorithm confusion ----------------------------------------------------


def test_rs256_token_is_accepted_with_the_public_key(rsa_key: rsa.RSAPrivateKey) -> None:
    verifier = TokenVerifier.from_public_key_pem(public_pem(rsa_key), audience=AUDIENCE, issuer=ISSUER)
    token = jwt.encode(claims(), rsa_key, algorithm="RS256")

    assert verifier.verify(bearer(token)).subject == "agent-7"


def test_rs256_token_signed_by_another_key_is_refused(
    rsa_key: rsa.RSAPrivateKey, other_rsa_key: rsa.RSAPrivateKey
) -> None:
    verifier = TokenVerifier.from_public_key_pem(public_pem(rsa_key), audience=AUDIENCE, issuer=ISSUER)
    token = jwt.encode(claims(), other_rsa_key, algorithm="RS256")

    assert_refused(verifier, bearer(token), "signature is invalid")


def test_hs_rs_confusion_is_refused(rsa_key: rsa.RSAPrivateKey) -> None:
    # The classic attack: sign HS256 with the server's *public* key as the HMAC secret.
    verifier = TokenVerifier.from_public_key_pem(public_pem(rsa_key), audience=AUDIENCE, issuer=ISSUER)
    token = hand_signed_hs256(claims(), public_pem(rsa_key))

    assert_refused(verifier, bearer(token), "algorithm this service does not accept")


def test_rs_algorithm_other_than_rs256_is_refused(rsa_key: rsa.RSAPrivateKey) -> None:
    verifier = TokenVerifier.from_public_key_pem(public_pem(rsa_key), audience=AUDIENCE, issuer=ISSUER)
    token = jwt.encode(claims(), rsa_key, algorithm="PS256")

    assert_refused(verifier, bearer(token), "algorithm this service does not accept")


def test_es256_token_is_accepted_and_rs256_refused(
    ec_key: ec.EllipticCurvePrivateKey, rsa_key: rsa.RSAPrivateKey
) -> None:
    verifier = TokenVerifier.from_public_key_pem(public_pem(ec_key), audience=AUDIENCE, issuer=ISSUER)

    assert verifier.verify(bearer(jwt.encode(claims(), ec_key, algorithm="ES256"))).subject == "agent-7"
    assert_refused(verifier, bearer(jwt.encode(claims(), rsa_key, algorithm="RS256")), "algorithm")


def test_short_rsa_key_is_a_configuration_error() -> None:
    short = rsa.generate_private_key(public_exponent=65537, key_size=1024)  # noqa: S505 - the point: a breakable key is refused

    with pytest.raises(ConfigurationError, match="at least 2048 bits"):
        TokenVerifier.from_public_key_pem(public_pem(short))


def test_non_p256_ec_key_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="P-256"):
        TokenVerifier.from_public_key_pem(public_pem(ec.generate_private_key(ec.SECP384R1())))


def test_private_key_file_is_a_configuration_error(rsa_key: rsa.RSAPrivateKey) -> None:
    private_pem = rsa_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )

    with pytest.raises(ConfigurationError, match="PEM public key") as caught:
        TokenVerifier.from_public_key_pem(private_pem)

    assert "PRIVATE" not in str(caught.value)


# --- JWKS ---------------------------------------------------------------------------------------


def jwks(*entries: tuple[str, rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey]) -> str:
    keys = []
    for kid, key in entries:
        if isinstance(key, rsa.RSAPrivateKey):
            jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
        else:
            jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(key.public_key()))
        jwk["kid"] = kid
        keys.append(jwk)
    return json.dumps({"keys": keys})


def test_jwks_picks_the_key_by_kid(rsa_key: rsa.RSAPrivateKey, ec_key: ec.EllipticCurvePrivateKey) -> None:
    verifier = TokenVerifier.from_jwks_json(jwks(("rsa-1", rsa_key), ("ec-1", ec_key)), audience=AUDIENCE)
    rs_token = jwt.encode(claims(), rsa_key, algorithm="RS256", headers={"kid": "rsa-1"})
    es_token = jwt.encode(claims(), ec_key, algorithm="ES256", headers={"kid": "ec-1"})

    assert verifier.verify(bearer(rs_token)).subject == "agent-7"
    assert verifier.verify(bearer(es_token)).subject == "agent-7"


def test_jwks_refuses_an_unknown_kid(rsa_key: rsa.RSAPrivateKey, other_rsa_key: rsa.RSAPrivateKey) -> None:
    verifier = TokenVerifier.from_jwks_json(jwks(("rsa-1", rsa_key), ("rsa-2", other_rsa_key)))
    token = jwt.encode(claims(), rsa_key, algorithm="RS256", headers={"kid": "rsa-9"})

    assert_refused(verifier, bearer(token), "unknown key")


def test_jwks_refuses_a_key_used_under_the_wrong_kid(
    rsa_key: rsa.RSAPrivateKey, other_rsa_key: rsa.RSAPrivateKey
) -> None:
    verifier = TokenVerifier.from_jwks_json(jwks(("rsa-1", rsa_key), ("rsa-2", other_rsa_key)))
    token = jwt.encode(claims(), other_rsa_key, algorithm="RS256", headers={"kid": "rsa-1"})

    assert_refused(verifier, bearer(token), "signature is invalid")


def test_jwks_refuses_an_unknown_critical_header_extension_naming_crit(
    rsa_key: rsa.RSAPrivateKey, other_rsa_key: rsa.RSAPrivateKey
) -> None:
    # With several keys the `kid` is read first: PyJWT's reason there was "not a well-formed JWT".
    verifier = TokenVerifier.from_jwks_json(jwks(("rsa-1", rsa_key), ("rsa-2", other_rsa_key)))
    token = jwt.encode(claims(), rsa_key, algorithm="RS256", headers={"kid": "rsa-1", "crit": ["exp-ext"]})

    assert_refused(verifier, bearer(token), "'crit' header names an extension this service does not support")


def test_jwks_with_a_symmetric_key_is_a_configuration_error() -> None:
    text = json.dumps({"keys": [{"kty": "oct", "kid": "k", "k": b64url(SECRET.encode())}]})

    with pytest.raises(ConfigurationError, match="only RSA and EC"):
        TokenVerifier.from_jwks_json(text)


def test_jwks_that_is_not_json_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="JWT_JWKS_FILE"):
        TokenVerifier.from_jwks_json("{not json")


# --- settings -----------------------------------------------------------------------------------


def test_auth_off_makes_every_caller_anonymous() -> None:
    verifier = TokenVerifier.from_settings(Settings(auth_mode="off"))

    assert not verifier.enabled
    assert verifier.verify(None) is ANONYMOUS
    assert verifier.verify("Bearer garbage") is ANONYMOUS


def test_settings_with_a_secret_verify_hs256() -> None:
    verifier = TokenVerifier.from_settings(Settings(auth_mode="jwt", jwt_secret=SECRET, jwt_audience=AUDIENCE))

    assert verifier.verify(bearer(jwt.encode(claims(), SECRET, algorithm="HS256"))).subject == "agent-7"
    assert SECRET not in repr(verifier)


def test_settings_with_a_public_key_file_verify_rs256(tmp_path: Path, rsa_key: rsa.RSAPrivateKey) -> None:
    key_file = tmp_path / "public.pem"
    key_file.write_bytes(public_pem(rsa_key))

    verifier = TokenVerifier.from_settings(Settings(auth_mode="jwt", jwt_public_key_file=key_file, jwt_issuer=ISSUER))

    assert verifier.verify(bearer(jwt.encode(claims(), rsa_key, algorithm="RS256"))).subject == "agent-7"


def test_settings_with_a_jwks_file_read_it_at_start(tmp_path: Path, ec_key: ec.EllipticCurvePrivateKey) -> None:
    key_file = tmp_path / "jwks.json"
    key_file.write_text(jwks(("ec-1", ec_key)))

    verifier = TokenVerifier.from_settings(Settings(auth_mode="jwt", jwt_jwks_file=key_file))
    key_file.unlink()

    token = jwt.encode(claims(), ec_key, algorithm="ES256", headers={"kid": "ec-1"})
    assert verifier.verify(bearer(token)).subject == "agent-7"


def test_settings_with_two_key_sources_are_refused_before_anything_starts(
    tmp_path: Path, rsa_key: rsa.RSAPrivateKey, monkeypatch: pytest.MonkeyPatch
) -> None:
    key_file = tmp_path / "public.pem"
    key_file.write_bytes(public_pem(rsa_key))
    # Refused by the settings (exit 2 at once), not when the verifier is built after PostgreSQL started.
    for name, value in {"AUTH_MODE": "jwt", "JWT_SECRET": SECRET, "JWT_PUBLIC_KEY_FILE": str(key_file)}.items():
        monkeypatch.setenv(name, value)

    with pytest.raises(ConfigurationError, match="takes one of JWT_SECRET, JWT_PUBLIC_KEY_FILE and JWT_JWKS_FILE"):
        load_settings()


@pytest.mark.parametrize(
    ("name", "value", "why"),
    [
        ("JWT_LEEWAY_S", "inf", "finite"),  # every expired token would pass
        ("JWT_LEEWAY_S", "86400", "less than or equal to 300"),
        ("OUTBOX_LEASE_S", "Infinity", "finite"),  # PostgreSQL: interval out of range, nothing indexed
        ("QUERY_CACHE_TTL_SECS", "inf", "finite"),
    ],
)
def test_an_infinite_or_unbounded_duration_is_refused_at_start(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, why: str
) -> None:
    monkeypatch.setenv(name, value)

    with pytest.raises(ConfigurationError, match=f"{name}: .*{why}"):
        load_settings()


def test_settings_with_a_missing_key_file_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="JWT_PUBLIC_KEY_FILE: cannot read"):
        TokenVerifier.from_settings(Settings(auth_mode="jwt", jwt_public_key_file=tmp_path / "absent.pem"))


# --- authorization ------------------------------------------------------------------------------


def principal(
    projects: frozenset[str] | None = frozenset({"alpha"}), scopes: frozenset[str] = frozenset({"search"})
) -> Principal:
    return Principal(subject="agent-7", projects=projects, scopes=scopes, token="t0k3n")


def test_authorize_allows_a_granted_project_and_scope() -> None:
    authorize(principal(), project="alpha", scope="search")


def test_authorize_refuses_another_project_without_naming_it() -> None:
    with pytest.raises(PermissionDeniedError) as caught:
        authorize(principal(), project="beta", scope="search")

    assert "beta" not in caught.value.message


def test_authorize_refuses_a_missing_scope() -> None:
    with pytest.raises(PermissionDeniedError, match="'ingest' scope"):
        authorize(principal(), project="alpha", scope="ingest")


def test_star_projects_grant_every_project() -> None:
    authorize(principal(projects=None), project="anything", scope="search")


def test_admin_scope_grants_every_scope() -> None:
    authorize(principal(scopes=frozenset({"admin"})), project="alpha", scope="ingest")


def test_anonymous_may_do_everything() -> None:
    authorize(ANONYMOUS, project="alpha", scope="admin")


# --- cache scope --------------------------------------------------------------------------------


def test_cache_scope_is_shared_by_equal_grants_and_hides_the_token() -> None:
    first = Principal("a", frozenset({"alpha", "beta"}), frozenset({"search"}), token="token-one")
    second = Principal("b", frozenset({"beta", "alpha"}), frozenset({"search"}), token="token-two")

    assert cache_scope(first) == cache_scope(second)
    assert "token-one" not in cache_scope(first)


@pytest.mark.parametrize(
    "other",
    [
        Principal("a", frozenset({"alpha"}), frozenset({"search"})),
        Principal("a", None, frozenset({"search"})),
        Principal("a", frozenset({"alpha", "beta"}), frozenset({"search", "ingest"})),
    ],
)
def test_cache_scope_differs_when_grants_differ(other: Principal) -> None:
    base = Principal("a", frozenset({"alpha", "beta"}), frozenset({"search"}))

    assert cache_scope(base) != cache_scope(other)


def test_cache_scope_tells_apart_grants_whose_project_lists_join_alike() -> None:
    # The projects were joined with "," into one string: ["alpha,beta"] read as ["alpha", "beta"], and a
    # list holding "*" as "*" (every project). Neither could reach the other's entries (the searched project
    # must be granted, and neither id is valid), but one cache scope must never stand for two sets of grants.
    def grants(projects: frozenset[str] | None) -> str:
        return cache_scope(Principal("a", projects, frozenset({"search"})))

    assert grants(frozenset({"alpha,beta"})) != grants(frozenset({"alpha", "beta"}))
    assert grants(frozenset({"*"})) != grants(None)


def test_cache_scope_of_anonymous() -> None:
    assert cache_scope(ANONYMOUS) == "anonymous"


def test_authorize_scope_needs_the_scope_or_admin() -> None:
    authorize_scope(principal(scopes=frozenset({"admin"})), scope="admin")
    authorize_scope(principal(scopes=frozenset({"admin"})), scope="ingest")

    with pytest.raises(PermissionDeniedError, match="'admin' scope"):
        authorize_scope(principal(scopes=frozenset({"search", "ingest"})), scope="admin")


def test_refusals_are_logged_with_a_reason_but_never_the_token(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="poimen.auth")
    verifier = TokenVerifier.from_hs256_secret(SECRET)
    forged = jwt.encode(claims(), OTHER_SECRET, algorithm="HS256")

    with pytest.raises(AuthenticationError):
        verifier.verify(f"Bearer {forged}")
    with pytest.raises(PermissionDeniedError):
        authorize(principal(), project="beta", scope="search")

    messages = [record.getMessage() for record in caplog.records]
    assert messages == [
        "bearer token refused: the bearer token signature is invalid",
        "request refused: the token does not grant access to this project",
    ]
    rendered = "".join(repr(record.__dict__) for record in caplog.records)
    assert forged not in rendered
    assert forged.rsplit(".", 1)[1] not in rendered
    assert "t0k3n" not in rendered


def test_empty_issuer_and_audience_variables_skip_those_checks() -> None:
    # `JWT_ISSUER=` in a .env file or `docker -e` meant "the issuer must be the empty string": every token failed.
    settings = Settings(_env_file=None, auth_mode="jwt", jwt_secret=SECRET, jwt_issuer=" ", jwt_audience="")
    assert (settings.jwt_issuer, settings.jwt_audience) == (None, None)
    token = jwt.encode(claims(iss="https://elsewhere.example", aud=None), SECRET, algorithm="HS256")
    assert TokenVerifier.from_settings(settings).verify(bearer(token)).subject == "agent-7"


def test_a_token_over_the_length_cap_is_refused_before_it_is_decoded() -> None:
    huge = jwt.encode(claims(padding="x" * 20_000), SECRET, algorithm="HS256")
    assert_refused(hs_verifier(), bearer(huge), "longer than 16384 characters")
    assert hs_verifier().verify(bearer(jwt.encode(claims(padding="x" * 8_000), SECRET, algorithm="HS256"))).subject


def test_jwks_leaves_out_encryption_keys(rsa_key: rsa.RSAPrivateKey, other_rsa_key: rsa.RSAPrivateKey) -> None:
    # An identity provider's set holds its encryption key too; a token signed with that key is not the issuer's.
    key_set = json.loads(jwks(("sig-1", rsa_key), ("enc-1", other_rsa_key)))
    key_set["keys"][1]["use"] = "enc"
    verifier = TokenVerifier.from_jwks_json(json.dumps(key_set))
    signed = jwt.encode(claims(), rsa_key, algorithm="RS256", headers={"kid": "sig-1"})
    encryption_signed = jwt.encode(claims(), other_rsa_key, algorithm="RS256", headers={"kid": "enc-1"})

    assert verifier.verify(bearer(signed)).subject == "agent-7"
    assert_refused(verifier, bearer(encryption_signed), "unknown key")


def test_jwks_with_only_encryption_keys_is_a_configuration_error(rsa_key: rsa.RSAPrivateKey) -> None:
    key_set = json.loads(jwks(("enc-1", rsa_key)))
    key_set["keys"][0]["use"] = "enc"

    with pytest.raises(ConfigurationError, match="no signing key"):
        TokenVerifier.from_jwks_json(json.dumps(key_set))


@pytest.mark.parametrize("kids", [("same", "same"), (None, None)])
def test_jwks_with_two_keys_under_one_kid_is_a_configuration_error(
    rsa_key: rsa.RSAPrivateKey, other_rsa_key: rsa.RSAPrivateKey, kids: tuple[str | None, str | None]
) -> None:
    key_set = json.loads(jwks(("a", rsa_key), ("b", other_rsa_key)))
    for jwk, kid in zip(key_set["keys"], kids, strict=True):
        jwk.pop("kid")
        if kid is not None:
            jwk["kid"] = kid

    with pytest.raises(ConfigurationError, match="two signing keys with"):
        TokenVerifier.from_jwks_json(json.dumps(key_set))


@pytest.mark.parametrize(
    ("claim", "value", "reason"),
    [
        ("exp", "99999999999", "malformed 'exp' claim"),  # PyJWT compared int("99999999999"): it never expired
        ("nbf", "0", "malformed 'nbf' claim"),
        ("exp", True, "expired"),
        ("iat", [1], "malformed 'iat' claim"),  # PyJWT's own check: "the bearer token is invalid"
        ("iat", "now", "malformed 'iat' claim"),
    ],
)
def test_a_time_claim_that_is_not_a_number_is_refused(claim: str, value: object, reason: str) -> None:
    token = jwt.encode(claims(**{claim: value}), SECRET, algorithm="HS256")

    assert_refused(hs_verifier(), bearer(token), reason)
