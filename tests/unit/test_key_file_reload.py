"""JWT key files re-read while serving (`app.wiring.key_files`): real files, real keys, the real verifier.

Each poll is one `reload()` call, so no test waits for a clock. What must hold: a key added to the file is
accepted after a poll (rotation without a restart), and no content that cannot be used (half written,
invalid, empty, gone) ever leaves the service with no keys or other keys than the last good ones.
"""

from __future__ import annotations

import json
import logging
import time
from typing import TYPE_CHECKING

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from prometheus_client import REGISTRY

from app.auth.tokens import TokenVerifier
from app.config import Settings
from app.domain.errors import AuthenticationError
from app.wiring.key_files import KeyFileWatcher

if TYPE_CHECKING:
    from pathlib import Path


@pytest.fixture(scope="module")
def old_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def new_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def key_set(*entries: tuple[str, rsa.RSAPrivateKey]) -> str:
    keys = []
    for kid, key in entries:
        jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
        keys.append(jwk | {"kid": kid, "use": "sig", "alg": "RS256"})
    return json.dumps({"keys": keys})


def public_pem(key: rsa.RSAPrivateKey) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def bearer(key: rsa.RSAPrivateKey, kid: str | None) -> str:
    claims = {"sub": "rotator", "exp": int(time.time()) + 300, "projects": "*", "scope": "search"}
    return "Bearer " + jwt.encode(claims, key, algorithm="RS256", headers={"kid": kid} if kid else None)


def accepts(verifier: TokenVerifier, header: str) -> bool:
    try:
        verifier.verify(header)
    except AuthenticationError:
        return False
    return True


def refused_key_files() -> float:
    return REGISTRY.get_sample_value("poimen_jwt_key_file_reload_errors_total") or 0.0


def replace_file(path: Path, content: str | bytes) -> None:
    """A whole new file renamed over the old one, as a Secret's `..data` swap or an atomic write does."""
    staged = path.with_name(path.name + ".new")
    staged.write_bytes(content.encode() if isinstance(content, str) else content)
    staged.replace(path)


def watched(settings: Settings) -> tuple[TokenVerifier, KeyFileWatcher]:
    verifier = TokenVerifier.from_settings(settings)
    watcher = KeyFileWatcher.for_settings(settings, verifier)
    assert watcher is not None
    return verifier, watcher


@pytest.fixture
def jwks_file(tmp_path: Path, old_key: rsa.RSAPrivateKey) -> Path:
    path = tmp_path / "jwks.json"
    path.write_text(key_set(("old", old_key)))
    return path


def test_a_key_added_to_the_jwks_file_is_accepted_after_a_poll_and_the_old_one_still_is(
    jwks_file: Path, old_key: rsa.RSAPrivateKey, new_key: rsa.RSAPrivateKey
) -> None:
    verifier, watcher = watched(Settings(auth_mode="jwt", jwt_jwks_file=jwks_file))
    assert not accepts(verifier, bearer(new_key, "new"))

    replace_file(jwks_file, key_set(("old", old_key), ("new", new_key)))
    reloaded = watcher.reload()

    assert reloaded
    assert accepts(verifier, bearer(new_key, "new"))
    assert accepts(verifier, bearer(old_key, "old"))  # both, while callers move over: no downtime
    assert watcher.reload() is False  # unchanged content is not taken again

    replace_file(jwks_file, key_set(("new", new_key)))
    watcher.reload()

    assert not accepts(verifier, bearer(old_key, "old"))  # removing the old key retires it
    assert accepts(verifier, bearer(new_key, "new"))


@pytest.mark.parametrize(
    "content",
    [
        b'{"keys": [{"kty": "RSA", "kid": "new", "n": "0vx7ag',  # cut mid-write
        b"",
        b'{"keys": []}',
        b"not json",
        b"\xff\xfe{",
        b'{"keys": [{"kty": "oct", "kid": "new", "k": "c2VjcmV0"}]}',
    ],
    ids=["half-written", "empty", "no-keys", "not-json", "not-utf8", "symmetric"],
)
def test_content_that_cannot_be_used_keeps_the_keys_in_force(
    jwks_file: Path,
    old_key: rsa.RSAPrivateKey,
    content: bytes,
    caplog: pytest.LogCaptureFixture,
) -> None:
    verifier, watcher = watched(Settings(auth_mode="jwt", jwt_jwks_file=jwks_file))
    caplog.set_level(logging.WARNING, logger="poimen.auth")
    before = refused_key_files()

    replace_file(jwks_file, content)
    polls = [watcher.reload() for _ in range(3)]

    assert polls == [False, False, False]
    assert accepts(verifier, bearer(old_key, "old"))
    refusals = [record for record in caplog.records if "not used, the keys read before stay in force" in record.message]
    assert len(refusals) == 1  # once per content, not once per poll
    assert refused_key_files() == before + 1  # counted as it is logged: an alert needs no log search


def test_a_file_rewritten_in_place_is_taken_only_once_whole(
    jwks_file: Path, old_key: rsa.RSAPrivateKey, new_key: rsa.RSAPrivateKey
) -> None:
    verifier, watcher = watched(Settings(auth_mode="jwt", jwt_jwks_file=jwks_file))
    whole = key_set(("old", old_key), ("new", new_key))

    jwks_file.write_text(whole[: len(whole) // 2])  # the same file, truncated and half written
    mid_write = [watcher.reload(), watcher.reload()]
    jwks_file.write_text(whole)
    finished = [watcher.reload(), watcher.reload()]

    assert mid_write == [False, False]
    assert accepts(verifier, bearer(old_key, "old"))
    assert finished == [False, True]  # the new bytes once more, then taken
    assert accepts(verifier, bearer(new_key, "new"))


def test_a_deleted_key_file_keeps_the_keys_and_its_return_is_taken(
    jwks_file: Path, old_key: rsa.RSAPrivateKey, new_key: rsa.RSAPrivateKey
) -> None:
    verifier, watcher = watched(Settings(auth_mode="jwt", jwt_jwks_file=jwks_file))
    before = refused_key_files()

    jwks_file.unlink()
    gone = [watcher.reload(), watcher.reload()]
    kept = accepts(verifier, bearer(old_key, "old"))
    replace_file(jwks_file, key_set(("new", new_key)))
    back = watcher.reload()

    assert (gone, kept, back) == ([False, False], True, True)
    assert refused_key_files() == before + 1  # a file that stays gone is counted once
    assert accepts(verifier, bearer(new_key, "new"))


def test_a_replaced_public_key_file_is_re_read_too(
    tmp_path: Path, old_key: rsa.RSAPrivateKey, new_key: rsa.RSAPrivateKey, caplog: pytest.LogCaptureFixture
) -> None:
    pem_file = tmp_path / "public.pem"
    pem_file.write_bytes(public_pem(old_key))
    verifier, watcher = watched(Settings(auth_mode="jwt", jwt_public_key_file=pem_file))
    caplog.set_level(logging.INFO, logger="poimen.auth")

    replace_file(pem_file, public_pem(new_key)[:40])  # cut: kept out
    cut = watcher.reload()
    replace_file(pem_file, public_pem(new_key))
    whole = watcher.reload()

    assert (cut, whole) == (False, True)
    assert accepts(verifier, bearer(new_key, None))
    assert not accepts(verifier, bearer(old_key, None))
    taken = [record.getMessage() for record in caplog.records if "JWT keys re-read" in record.getMessage()]
    assert len(taken) == 1
    assert taken[0].endswith("(JWT_PUBLIC_KEY_FILE): 1 key(s), kid none")  # the one key has no kid (was "['None']")


def test_no_watcher_without_a_key_file() -> None:
    for settings in (Settings(auth_mode="off"), Settings(auth_mode="jwt", jwt_secret="s" * 40)):
        assert KeyFileWatcher.for_settings(settings, TokenVerifier.from_settings(settings)) is None
