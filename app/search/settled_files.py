"""A settings file read by content, an edit in place judged only once a later read finds it unchanged.

The flags file (`app.search.flags`) and the flagd definitions (`app.engines.flagd_definitions`) are polled.
A file renamed over the old one (an atomic replace, a ConfigMap's `..data` symlink swap) is whole when seen;
one rewritten in place may be read between its truncation and its last write, empty or cut at a line, which
still parses. Such a read is held back until the next poll reads the same bytes from the same file.
"""

from __future__ import annotations

import enum
import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path


class FileState(enum.Enum):
    """What one poll of a settings file found."""

    UNCHANGED = "unchanged"  # the bytes the caller holds as settled
    PENDING = "pending"  # rewritten in place since the last poll: maybe mid-write, judged at the next one
    UNREADABLE = "unreadable"
    CHANGED = "changed"


@dataclass(frozen=True, slots=True)
class FileRead:
    """One poll: its `state`; the `content` and its `digest` when CHANGED; `digest` and `error` when UNREADABLE.

    An unreadable file's digest names the error's kind (`unreadable:FileNotFoundError`), so a caller that
    reports each new state once reports a file that stays missing once.
    """

    state: FileState
    content: bytes = b""
    digest: str = ""
    error: str = ""


class SettledFile:
    """`path` polled by content; not thread-safe (each caller polls under its own lock)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._pending_digest: str | None = None
        self._file_id: tuple[int, int] | None = None  # (device, inode) of the file last taken

    def read(self, *, settled_digest: str | None) -> FileRead:
        """Poll once; `settled_digest` is the digest of the content the caller holds (None: none yet)."""
        try:
            status = self.path.stat()
            content = self.path.read_bytes()
        except OSError as error:
            self._file_id = None
            return FileRead(
                FileState.UNREADABLE,
                digest=f"unreadable:{type(error).__name__}",
                error=f"cannot read: {error.strerror or error}",
            )
        digest = hashlib.sha256(content).hexdigest()
        if digest == settled_digest:
            self._pending_digest = None
            return FileRead(FileState.UNCHANGED, digest=digest)
        file_id = (status.st_dev, status.st_ino)
        if file_id == self._file_id and digest != self._pending_digest:
            self._pending_digest = digest  # the same file rewritten in place, not one renamed over it
            return FileRead(FileState.PENDING, digest=digest)
        self._file_id, self._pending_digest = file_id, None
        return FileRead(FileState.CHANGED, content=content, digest=digest)
