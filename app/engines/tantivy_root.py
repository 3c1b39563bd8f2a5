"""Whether the embedded lexical index's root folder is still the one opened, and taking a root back.

The root can go away under a running service (a volume detached or failed, the folder moved): tantivy
would go on answering from the segments it has open and only fail at the next commit. So every search,
write and ping of `app.engines.tantivy_index` first asks `RootAttachment.attach` whether the root is still
the one opened (same device and inode, version file present). When it is not, every project index and
writer is dropped (`on_lost`) and every call raises `EngineUnavailableError` until a root of this schema is
back at the path; it is then reopened. An empty folder, or a root of another schema, is never taken.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from app.domain.errors import EngineUnavailableError
from app.engines.tantivy_errors import raise_unavailable
from app.engines.tantivy_folders import folder_identity, still_attached, stored_root_version
from app.engines.tantivy_projects import ENGINE_NAME
from app.engines.tantivy_schema import SCHEMA_VERSION, SCHEMA_VERSION_FILE

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

logger = logging.getLogger(__name__)


class RootAttachment:
    """The root folder opened at `path` (its device and inode) and whether it is attached now.

    Not thread-safe: the caller holds its own lock around `attach`.
    """

    def __init__(self, path: Path, *, identity: tuple[int, int] | None) -> None:
        self._path = path
        self._identity = identity
        self._attached = True

    def attach(self, *, on_lost: Callable[[], object]) -> None:
        """Return while the root is the one opened; else call `on_lost` once and reopen what is at the path.

        Blocking (`stat` calls): the caller runs it in a worker thread, so a hung volume holds no event loop.

        Raises:
            EngineUnavailableError: no usable root at the path (yet).
        """
        if self._attached and still_attached(self._path, self._identity, SCHEMA_VERSION_FILE):
            return
        if self._attached:
            logger.error("the lexical index folder %s is gone or was replaced: searches and writes wait", self._path)
            on_lost()
            self._attached = False
        self._reattach()

    def _reattach(self) -> None:
        """Take the root now at the path (lock held). Only a root of this schema is taken.

        An empty folder is not: creating an index in it would hide that every document is missing.
        """
        unavailable = f"the lexical index folder {self._path} is unavailable"
        try:
            identity = folder_identity(self._path)
            version = stored_root_version(self._path)
        except (OSError, ValueError) as error:
            raise_unavailable(unavailable, error)
        if version != SCHEMA_VERSION:
            message = f"{unavailable}: it holds no index of this schema"
            raise EngineUnavailableError(message, engine=ENGINE_NAME)
        if identity != self._identity:
            # Another folder than the one opened (a volume restored from a copy): it may miss documents.
            logger.warning(
                "the lexical index in %s is another folder than the one opened; if it may be missing documents, "
                "refill it from PostgreSQL with `poimen reindex --project <id>` for each project",
                self._path,
            )
        logger.warning("the lexical index folder %s is back: reopened", self._path)
        self._identity, self._attached = identity, True
