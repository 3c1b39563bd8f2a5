"""Bearer-token authentication and project/scope authorization (`AUTH_MODE=off|jwt`).

`TokenVerifier.verify()` turns an `Authorization` header into a `Principal` or raises
`AuthenticationError` (the HTTP layer answers 401 with `WWW-Authenticate: Bearer`); `authorize()`
raises `PermissionDeniedError` (403) when the principal lacks the project or the scope.

The accepted algorithm is pinned by the configured key, never taken from the token: `JWT_SECRET`
accepts only HS256, an RSA key only RS256, a P-256 key only ES256. `alg: none` and algorithm
confusion (an RS public key used as an HMAC secret) therefore fail. Tokens and secrets never
appear in messages, logs or reprs; messages say what was wrong, in words safe to return.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, NoReturn

import jwt

from app.auth.claims import (
    ALL_PROJECTS,
    check_critical_extensions,
    check_issued_at,
    check_lifetime,
    check_time_claims,
    check_token_type,
    granted_projects,
    granted_scopes,
    subject,
    unverified_header,
)
from app.auth.verification_keys import (
    VerificationKey,
    hs256_secret_keys,
    jwks_file_keys,
    jwks_json_keys,
    public_key_pem_keys,
    read_key_file,
)
from app.config import ConfigurationError
from app.domain.errors import AuthenticationError, PermissionDeniedError

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from app.config import Settings

logger = logging.getLogger("poimen.auth")

SCOPE_SEARCH: Final = "search"
SCOPE_INGEST: Final = "ingest"
SCOPE_ADMIN: Final = "admin"
"""`admin` grants every scope; `search` reads, `ingest` writes documents."""
KNOWN_SCOPES: Final = frozenset({SCOPE_SEARCH, SCOPE_INGEST, SCOPE_ADMIN})
BEARER_PREFIX: Final = "bearer "


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling and what the token grants.

    `projects` is None when the token grants every project (`"projects": "*"`). `token` is the raw
    bearer token, kept only to forward to OpenSearch; it is left out of `repr`.
    """

    subject: str
    projects: frozenset[str] | None
    scopes: frozenset[str]
    token: str = field(default="", repr=False)

    def grants_project(self, project: str) -> bool:
        """True when the token covers `project`."""
        return self.projects is None or project in self.projects

    def grants_scope(self, scope: str) -> bool:
        """True when the token carries `scope` or `admin`."""
        return scope in self.scopes or SCOPE_ADMIN in self.scopes


ANONYMOUS: Final = Principal(subject="anonymous", projects=None, scopes=KNOWN_SCOPES, token="")
"""The caller when `AUTH_MODE=off`: every project and scope (the server then binds to loopback)."""


def authorize(principal: Principal, *, project: str, scope: str) -> None:
    """Raise `PermissionDeniedError` unless `principal` may use `scope` on `project`.

    The message is the same whether or not the project exists, so a 403 reveals nothing about it.
    The refusal is logged with the subject, scope and project, never the token.
    """
    if not principal.grants_scope(scope):
        msg = f"the token does not grant the {scope!r} scope"
    elif not principal.grants_project(project):
        msg = "the token does not grant access to this project"
    else:
        return
    _refuse(principal, msg, scope=scope, project=project)


def authorize_scope(principal: Principal, *, scope: str) -> None:
    """Raise `PermissionDeniedError` unless `principal` carries `scope` (endpoints of no project: admin)."""
    if not principal.grants_scope(scope):
        _refuse(principal, f"the token does not grant the {scope!r} scope", scope=scope, project=None)


def _refuse(principal: Principal, message: str, *, scope: str, project: str | None) -> NoReturn:
    details = {"subject": principal.subject, "scope": scope, "project": project}
    logger.info("request refused: %s", message, extra=details)
    raise PermissionDeniedError(message)


def cache_scope(principal: Principal) -> str:
    """A short, non-secret string naming what `principal` may see, for query-cache keys.

    Two principals with the same grants (projects and scopes) share it, so they share cache entries;
    any difference in grants gives a different string. It never contains the token. The projects are a
    JSON list (every project: the string `"*"`), so no two sets of grants spell alike (joined with ",",
    `["a,b"]` read as `["a", "b"]` and `["*"]` as every project).
    """
    if principal is ANONYMOUS:
        return "anonymous"
    projects: str | list[str] = ALL_PROJECTS if principal.projects is None else sorted(principal.projects)
    canonical = json.dumps({"projects": projects, "scopes": sorted(principal.scopes)}, separators=(",", ":"))
    return "grants:" + hashlib.sha256(canonical.encode()).hexdigest()[:32]


class TokenVerifier:
    """Verifies `Authorization: Bearer <JWT>` headers against the configured keys.

    `exp` is required; `iss` and `aud` are checked when configured; `nbf`, `exp` and `iat` allow
    `leeway_s` of clock skew; a token valid for longer than `max_lifetime_s` is refused. With several keys
    (a JWKS), the token's `kid` picks the key.
    A disabled verifier (`AUTH_MODE=off`) returns `ANONYMOUS` for every request.
    """

    def __init__(
        self,
        keys: Mapping[str | None, VerificationKey] | None,
        *,
        issuer: str | None = None,
        audience: str | None = None,
        leeway_s: float = 30.0,
        max_lifetime_s: float = 86400.0,
    ) -> None:
        self._keys = dict(keys) if keys is not None else None
        self._issuer = issuer
        self._audience = audience
        self._leeway_s = leeway_s
        self._max_lifetime_s = max_lifetime_s

    def __repr__(self) -> str:
        return f"TokenVerifier(enabled={self.enabled}, keys={len(self._keys or {})})"

    def replace_keys(self, keys: Mapping[str | None, VerificationKey]) -> None:
        """Verify with `keys` from now on (a key file re-read: `app.wiring.key_files`); never with none.

        Requests verify against the set in force when they started (one reference, swapped whole).
        """
        if self._keys is None or not keys:
            msg = "keys are replaced only in a verifier that has some (AUTH_MODE=jwt), and never by none"
            raise ValueError(msg)
        self._keys = dict(keys)

    @property
    def enabled(self) -> bool:
        """False when `AUTH_MODE=off`."""
        return self._keys is not None

    @classmethod
    def disabled(cls) -> TokenVerifier:
        """A verifier for `AUTH_MODE=off`: every caller is `ANONYMOUS`."""
        return cls(None)

    @classmethod
    def from_hs256_secret(cls, secret: str, **options: Any) -> TokenVerifier:  # noqa: ANN401 - issuer/audience/leeway_s/max_lifetime_s
        """HS256 with a shared secret (at least 32 characters, RFC 7518 §3.2)."""
        return cls(hs256_secret_keys(secret), **options)

    @classmethod
    def from_public_key_pem(cls, pem: bytes, **options: Any) -> TokenVerifier:  # noqa: ANN401 - issuer/audience/leeway_s/max_lifetime_s
        """RS256 (RSA >= 2048 bits) or ES256 (P-256), decided by the key type."""
        return cls(public_key_pem_keys(pem), **options)

    @classmethod
    def from_jwks_json(cls, text: str, **options: Any) -> TokenVerifier:  # noqa: ANN401 - issuer/audience/leeway_s/max_lifetime_s
        """RSA and EC keys of a JWK Set, picked by `kid` (`app.auth.verification_keys.jwks_json_keys`)."""
        return cls(jwks_json_keys(text), **options)

    @classmethod
    def from_settings(cls, settings: Settings) -> TokenVerifier:
        """Build from `AUTH_MODE` and exactly one of `JWT_SECRET`, `JWT_PUBLIC_KEY_FILE`, `JWT_JWKS_FILE`.

        Key files are read here, and re-read while serving by `app.wiring.key_files`. Raises
        `ConfigurationError` naming the variable on a bad key; logs a WARNING when `JWT_AUDIENCE` is unset.
        """
        if settings.auth_mode == "off":
            return cls.disabled()
        options: dict[str, Any] = {
            "issuer": settings.jwt_issuer,
            "audience": settings.jwt_audience,
            "leeway_s": settings.jwt_leeway_s,
            "max_lifetime_s": settings.jwt_max_lifetime_s,
        }
        configured = [
            name
            for name, value in (
                ("JWT_SECRET", settings.jwt_secret),
                ("JWT_PUBLIC_KEY_FILE", settings.jwt_public_key_file),
                ("JWT_JWKS_FILE", settings.jwt_jwks_file),
            )
            if value is not None
        ]
        if len(configured) != 1:
            msg = (
                f"AUTH_MODE=jwt needs exactly one of JWT_SECRET, JWT_PUBLIC_KEY_FILE, JWT_JWKS_FILE (got {configured})"
            )
            raise ConfigurationError(msg)
        if settings.jwt_audience is None:
            # RFC 8725 §3.9. An ID token says `typ: JWT` as an access token does: only `aud` refuses it.
            logger.warning(
                "AUTH_MODE=jwt without JWT_AUDIENCE: every token these keys verify is accepted, whatever it was "
                "issued for (an ID token, another API's access token); set JWT_AUDIENCE to this service's audience"
            )
        if settings.jwt_secret is not None:
            return cls.from_hs256_secret(settings.jwt_secret.get_secret_value(), **options)
        if settings.jwt_public_key_file is not None:
            pem = read_key_file(settings.jwt_public_key_file, "JWT_PUBLIC_KEY_FILE")
            return cls.from_public_key_pem(pem, **options)
        assert settings.jwt_jwks_file is not None  # noqa: S101 - exactly one is set, checked above
        return cls(jwks_file_keys(read_key_file(settings.jwt_jwks_file, "JWT_JWKS_FILE")), **options)

    def verify(self, authorization: str | Sequence[str] | None) -> Principal:
        """Return the caller of a request from its `Authorization` header (or all of the request's).

        Raises:
            AuthenticationError: no header, more than one, not `Bearer`, a token that does not decode, a bad
                signature, a refused algorithm, expired or not yet valid, wrong issuer or audience,
                an unknown `kid`, or malformed claims.
        """
        if self._keys is None:
            return ANONYMOUS
        try:
            return self._verified(_single_header(authorization))
        except AuthenticationError as error:
            # The reason is one of this module's fixed messages: it never quotes the token.
            logger.info("bearer token refused: %s", error.message)
            raise

    def _verified(self, authorization_header: str | None) -> Principal:
        token = _bearer_token(authorization_header)
        check_critical_extensions(unverified_header(token))
        verification_key = self._key_for(token)
        header, claims = self._decode(token, verification_key)
        check_token_type(header)
        check_time_claims(claims)
        now_s = time.time()
        check_issued_at(claims, leeway_s=self._leeway_s, now_s=now_s)
        check_lifetime(claims, max_lifetime_s=self._max_lifetime_s, leeway_s=self._leeway_s, now_s=now_s)
        return Principal(
            subject=subject(claims),
            projects=granted_projects(claims.get("projects")),
            scopes=granted_scopes(claims.get("scope")),
            token=token,
        )

    def _key_for(self, token: str) -> VerificationKey:
        keys = self._keys or {}
        if len(keys) == 1 and None in keys:
            return keys[None]
        try:
            kid = jwt.get_unverified_header(token).get("kid")
        except jwt.PyJWTError:
            msg = "the bearer token is not a well-formed JWT"
            raise AuthenticationError(msg) from None
        if kid in keys:
            return keys[kid]
        if kid is None and len(keys) == 1:
            return next(iter(keys.values()))
        msg = "the bearer token is signed with an unknown key"
        raise AuthenticationError(msg)

    def _decode(self, token: str, verification_key: VerificationKey) -> tuple[dict[str, Any], dict[str, Any]]:
        """The verified token's header and claims."""
        required = ["exp", "sub"] + (["iss"] if self._issuer else []) + (["aud"] if self._audience else [])
        try:
            decoded = jwt.decode_complete(
                token,
                verification_key.key,
                algorithms=[verification_key.algorithm],
                issuer=self._issuer,
                audience=self._audience,
                leeway=self._leeway_s,
                # `iat` is checked by `check_issued_at`, for a reason naming it (PyJWT's is a future `nbf`'s).
                options={"require": required, "verify_aud": self._audience is not None, "verify_iat": False},
            )
        except jwt.PyJWTError as error:
            raise AuthenticationError(_describe(error)) from None
        return decoded["header"], decoded["payload"]


MAX_TOKEN_CHARS: Final = 16_384
"""Longer tokens are refused before they are decoded: a 32 MB one took 1.8 s and hundreds of MB to refuse,
and no caller needed a token. Real JWTs, a few claims and a signature, are under 2,000 characters."""


def _single_header(authorization: str | Sequence[str] | None) -> str | None:
    """The request's one `Authorization` value; two are refused, never one of them picked.

    The field takes one value (RFC 9110 §11.6.2), and a proxy or gateway in front may have read the other:
    the service read the first, so it could authenticate a caller other than the one they checked.
    """
    if authorization is None or isinstance(authorization, str):
        return authorization
    if len(authorization) > 1:
        msg = "the request has more than one Authorization header"
        raise AuthenticationError(msg)
    return authorization[0] if authorization else None


def _bearer_token(authorization_header: str | None) -> str:
    if not authorization_header or not authorization_header.strip():
        msg = "a bearer token is required"
        raise AuthenticationError(msg)
    if not authorization_header.lower().startswith(BEARER_PREFIX):
        msg = "the Authorization header must use the Bearer scheme"
        raise AuthenticationError(msg)
    token = authorization_header[len(BEARER_PREFIX) :].strip()
    if not token:
        msg = "a bearer token is required"
        raise AuthenticationError(msg)
    if len(token) > MAX_TOKEN_CHARS:
        msg = f"the bearer token is longer than {MAX_TOKEN_CHARS} characters"
        raise AuthenticationError(msg)
    return token


_ERROR_DESCRIPTIONS: Final[tuple[tuple[type[jwt.PyJWTError], str], ...]] = (
    (jwt.ExpiredSignatureError, "the bearer token has expired"),
    (jwt.ImmatureSignatureError, "the bearer token is not valid yet"),
    (jwt.InvalidAudienceError, "the bearer token is not meant for this service (audience)"),
    (jwt.InvalidIssuerError, "the bearer token comes from an untrusted issuer"),
    (jwt.MissingRequiredClaimError, "the bearer token lacks a required claim"),
    (jwt.exceptions.InvalidSubjectError, "the bearer token has a malformed 'sub' claim"),  # not a string
    (jwt.InvalidAlgorithmError, "the bearer token uses an algorithm this service does not accept"),
    (jwt.InvalidSignatureError, "the bearer token signature is invalid"),
    (jwt.DecodeError, "the bearer token is not a well-formed JWT"),
)


def _describe(error: jwt.PyJWTError) -> str:
    """A fixed, safe message for a PyJWT error: never its text, which could quote token parts."""
    for error_type, description in _ERROR_DESCRIPTIONS:
        if isinstance(error, error_type):
            if isinstance(error, jwt.MissingRequiredClaimError):
                return f"{description}: {error.claim}"
            return description
    return "the bearer token is invalid"
