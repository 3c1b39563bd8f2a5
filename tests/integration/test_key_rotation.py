"""Key rotation on a running `poimen serve`: the JWKS file replaced as Kubernetes replaces a Secret's file.

The service read `JWT_JWKS_FILE` once at start, so a token signed with a key added to the mounted Secret was
refused until every pod restarted. Now the file is polled (`JWT_KEY_FILE_POLL_INTERVAL_S`): the new key is
accepted once the service has read it, the old one stays accepted while both are published, and a file cut
mid-write leaves the keys as they were.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.unit.test_key_file_reload import key_set

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from tests.integration.conftest import ServiceProcess

pytestmark = pytest.mark.integration

WAIT_S = 30.0  # for a poll every 0.2 s to have happened: a bound on the wait, not a timing asserted


def status_with(service: ServiceProcess, key: rsa.RSAPrivateKey, kid: str) -> int:
    claims = {"sub": "rotator", "exp": int(time.time()) + 600, "projects": "*", "scope": "search"}
    token = jwt.encode(claims, key, algorithm="RS256", headers={"kid": kid})
    headers = {"authorization": f"Bearer {token}"}
    return httpx.get(f"{service.url}/v1/projects/notes", headers=headers, timeout=10.0).status_code


def until(condition: Callable[[], bool]) -> bool:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return condition()


def test_a_key_added_to_the_mounted_jwks_is_accepted_without_a_restart(
    poimen_service: Callable[..., ServiceProcess], tmp_path: Path
) -> None:
    old_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    new_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwks_file = tmp_path / "JWT_JWKS"
    jwks_file.write_text(key_set(("old", old_key)))
    service = poimen_service(
        AUTH_MODE="jwt",
        JWT_JWKS_FILE=str(jwks_file),
        JWT_KEY_FILE_POLL_INTERVAL_S="0.2",
        RATE_LIMIT_REFUSED_AUTH_PER_ADDRESS_RPS="0",
    )
    before = (status_with(service, old_key, "old"), status_with(service, new_key, "new"))

    staged = tmp_path / "JWT_JWKS.new"
    staged.write_text(key_set(("old", old_key), ("new", new_key)))
    staged.replace(jwks_file)  # as the kubelet swaps a Secret volume's files: a whole new file
    rotated = until(lambda: status_with(service, new_key, "new") == 200)
    old_still = status_with(service, old_key, "old")

    jwks_file.write_text('{"keys": [{"kty": "RSA", "kid": "new", "n": "0vx7')  # in place, cut mid-write
    refused_line = until(lambda: "not used, the keys read before stay in force" in service.log_path.read_text())
    after_cut = (status_with(service, old_key, "old"), status_with(service, new_key, "new"))

    assert before == (200, 401)
    assert rotated, f"a token of the new key was still refused:\n{service.log_tail()}"
    assert old_still == 200
    assert refused_line, service.log_tail()
    assert after_cut == (200, 200)
