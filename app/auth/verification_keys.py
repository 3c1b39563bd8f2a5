"""The keys tokens are verified with, each bound to the one algorithm it accepts, read from the settings.

`JWT_SECRET` gives one HS256 key; `JWT_PUBLIC_KEY_FILE` one RS256 (RSA >= 2048 bits) or ES256 (P-256) key;
`JWT_JWKS_FILE` a key per `kid`. A key that cannot be used is a `ConfigurationError` naming the variable, never
quoting the key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.serialization import load_pem_public_key

from app.config import ConfigurationError

if TYPE_CHECKING:
    from pathlib import Path

MIN_RSA_KEY_BITS: Final = 2048


@dataclass(frozen=True, slots=True)
class VerificationKey:
    """One key and the single algorithm it verifies."""

    key: Any = field(repr=False)
    algorithm: str


VerificationKeys = dict[str | None, VerificationKey]
"""Keys by `kid`; a single key that needs no `kid` is under None."""


def hs256_secret_keys(secret: str) -> VerificationKeys:
    """HS256 with a shared secret (at least 32 characters, RFC 7518 §3.2, checked by the settings)."""
    return {None: VerificationKey(secret.encode(), "HS256")}


def public_key_pem_keys(pem: bytes) -> VerificationKeys:
    """RS256 (RSA >= 2048 bits) or ES256 (P-256), decided by the key type."""
    try:
        key = load_pem_public_key(pem)
    except (ValueError, TypeError):
        msg = "JWT_PUBLIC_KEY_FILE does not hold a PEM public key"
        raise ConfigurationError(msg) from None
    return {None: VerificationKey(key, _algorithm_for_key(key, "JWT_PUBLIC_KEY_FILE"))}


def jwks_json_keys(text: str) -> VerificationKeys:
    """RSA and EC keys of a JWK Set, picked by `kid`; symmetric (`oct`) keys are refused.

    Keys marked `"use": "enc"` are left out: they encrypt, and a signature made with one is not the
    issuer's (identity providers publish both in one set). Two signing keys with one `kid` (or two
    without) are refused: a token could not say which one signed it, and the later one silently won.
    """
    try:
        key_set = jwt.PyJWKSet.from_json(text)
    except (jwt.PyJWKSetError, jwt.InvalidKeyError, ValueError):
        msg = "JWT_JWKS_FILE is not a usable JWK Set"
        raise ConfigurationError(msg) from None
    keys: VerificationKeys = {}
    for jwk in key_set.keys:
        if jwk.public_key_use == "enc":
            continue
        if jwk.key_id in keys:
            which = f"kid {jwk.key_id!r}" if jwk.key_id is not None else "no kid"
            msg = f"JWT_JWKS_FILE has two signing keys with {which}: give each key its own kid"
            raise ConfigurationError(msg)
        if jwk.key_type not in {"RSA", "EC"}:
            msg = f"JWT_JWKS_FILE key {jwk.key_id!r} has type {jwk.key_type!r}; only RSA and EC keys are accepted"
            raise ConfigurationError(msg)
        algorithm = _algorithm_for_key(jwk.key, "JWT_JWKS_FILE")
        if jwk.algorithm_name != algorithm:  # the JWK's own `alg`, or derived from kty/crv
            msg = f"JWT_JWKS_FILE key {jwk.key_id!r} declares alg {jwk.algorithm_name!r}; expected {algorithm}"
            raise ConfigurationError(msg)
        keys[jwk.key_id] = VerificationKey(jwk.key, algorithm)
    if not keys:
        msg = 'JWT_JWKS_FILE holds no signing key (every key is marked "use": "enc")'
        raise ConfigurationError(msg)
    return keys


def jwks_file_keys(content: bytes) -> VerificationKeys:
    """`jwks_json_keys` of a JWKS file's bytes; bytes that are not UTF-8 are no usable JWK Set either."""
    try:
        text = content.decode()
    except UnicodeDecodeError:
        msg = "JWT_JWKS_FILE is not a usable JWK Set"
        raise ConfigurationError(msg) from None
    return jwks_json_keys(text)


def _algorithm_for_key(key: object, variable: str) -> str:
    if isinstance(key, rsa.RSAPublicKey):
        if key.key_size < MIN_RSA_KEY_BITS:
            msg = f"{variable}: RSA keys must have at least {MIN_RSA_KEY_BITS} bits"
            raise ConfigurationError(msg)
        return "RS256"
    if isinstance(key, ec.EllipticCurvePublicKey):
        if not isinstance(key.curve, ec.SECP256R1):
            msg = f"{variable}: EC keys must be on P-256 (ES256)"
            raise ConfigurationError(msg)
        return "ES256"
    msg = f"{variable}: only RSA (RS256) and P-256 EC (ES256) public keys are accepted"
    raise ConfigurationError(msg)


def read_key_file(path: Path, variable: str) -> bytes:
    """The bytes of a key file; `ConfigurationError` naming `variable` when it cannot be read."""
    try:
        return path.read_bytes()
    except OSError as error:
        msg = f"{variable}: cannot read {path}: {error.strerror}"
        raise ConfigurationError(msg) from None
