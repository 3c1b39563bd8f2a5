"""The JWT key file re-read while serving, so a rotated key is used without a restart.

Kubernetes updates a mounted Secret's files in place of the old ones (a `..data` symlink swap) when the
Secret changes; a key file read only at start kept the old keys until every pod was restarted, and a token
signed with the new key was refused meanwhile. `KeyFileWatcher` polls `JWT_JWKS_FILE` (or
`JWT_PUBLIC_KEY_FILE`) every `JWT_KEY_FILE_POLL_INTERVAL_S` by content (`app.search.settled_files`: a file
rewritten in place is taken only once a second read finds the same bytes) and swaps the verifier's keys
when the new content parses into at least one usable key. Anything else (an unreadable file, a half-written
or invalid one, a set with no signing key) keeps the keys in force and logs one WARNING per new content, so
the service never drops to no keys. Rotation without downtime: publish the old and the new key together
(two `kid`s), start signing with the new one once every replica has read it, remove the old one later.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from app.auth.verification_keys import jwks_file_keys, public_key_pem_keys
from app.config import ConfigurationError
from app.observability.metrics import JWT_KEY_FILE_RELOAD_ERRORS_TOTAL
from app.search.settled_files import FileState, SettledFile

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from app.auth.tokens import TokenVerifier
    from app.auth.verification_keys import VerificationKeys
    from app.config import Settings

logger = logging.getLogger("poimen.auth")


class KeyFileWatcher:
    """Re-reads one key file into `verifier`; built by `for_settings`, which installs the file's keys at once."""

    def __init__(
        self,
        verifier: TokenVerifier,
        *,
        path: Path,
        variable: str,
        parse: Callable[[bytes], VerificationKeys],
        poll_interval_s: float,
    ) -> None:
        self._verifier = verifier
        self._file = SettledFile(path)
        self._variable = variable
        self._parse = parse
        self.poll_interval_s = poll_interval_s
        self._digest: str | None = None  # of the content whose keys are in force, or of the last one refused

    @classmethod
    def for_settings(cls, settings: Settings, verifier: TokenVerifier) -> KeyFileWatcher | None:
        """The watcher of the configured key file (None without one), its keys already in the verifier.

        The file is read again here rather than trusted to be what the verifier read at start: the keys in
        force and the content later reads are compared with are then one read. `ConfigurationError` when
        that read cannot be used, as at start.
        """
        if settings.auth_mode != "jwt":
            return None
        parse: Callable[[bytes], VerificationKeys]
        if settings.jwt_jwks_file is not None:
            path, variable, parse = settings.jwt_jwks_file, "JWT_JWKS_FILE", jwks_file_keys
        elif settings.jwt_public_key_file is not None:
            path, variable, parse = settings.jwt_public_key_file, "JWT_PUBLIC_KEY_FILE", public_key_pem_keys
        else:
            return None
        watcher = cls(
            verifier, path=path, variable=variable, parse=parse, poll_interval_s=settings.jwt_key_file_poll_interval_s
        )
        watcher.install_current()
        return watcher

    def install_current(self) -> None:
        """Read the file now and use its keys; `ConfigurationError` (keys unchanged) when it cannot be used."""
        read = self._file.read(settled_digest=None)
        if read.state is not FileState.CHANGED:
            msg = f"{self._variable}: {read.error or 'cannot read'} ({self._file.path})"
            raise ConfigurationError(msg)
        self._verifier.replace_keys(self._parse(read.content))
        self._digest = read.digest

    def reload(self) -> bool:
        """Poll the file once; True when the verifier now holds the keys of new content."""
        read = self._file.read(settled_digest=self._digest)
        if read.state in {FileState.UNCHANGED, FileState.PENDING} or read.digest == self._digest:
            return False  # the same content, or maybe mid-write; a file that stays unreadable is reported once
        self._digest = read.digest  # new content is reported once, whether it is taken or refused
        if read.state is FileState.UNREADABLE:
            self._keep(read.error)
            return False
        try:
            keys = self._parse(read.content)
        except ConfigurationError as error:
            self._keep(str(error))
            return False
        self._verifier.replace_keys(keys)
        # Key ids are public (a token's header names its own); the keys themselves are never logged.
        kids = ", ".join(sorted(kid for kid in keys if kid is not None)) or "none"  # a PEM file's one key has none
        logger.info(
            "JWT keys re-read from %s (%s): %d key(s), kid %s", self._file.path, self._variable, len(keys), kids
        )
        return True

    def _keep(self, reason: str) -> None:
        # Counted as well as logged: a Secret rotated to a bad file is otherwise seen only in one log line per pod,
        # while every pod goes on with the old keys and refuses the new key's tokens.
        JWT_KEY_FILE_RELOAD_ERRORS_TOTAL.inc()
        logger.warning(
            "JWT key file %s (%s) not used, the keys read before stay in force: %s",
            self._file.path,
            self._variable,
            reason,
        )

    async def run(self) -> None:
        """Poll until cancelled; a poll that fails unexpectedly is logged and polling goes on."""
        while True:
            await asyncio.sleep(self.poll_interval_s)
            try:
                await asyncio.to_thread(self.reload)
            except Exception as error:  # noqa: BLE001 - one failed read must not end key rotation for good
                self._keep(f"re-reading failed: {type(error).__name__}")
