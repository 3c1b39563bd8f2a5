"""The folder layout of the embedded lexical index: a root holding one tantivy index per project.

    <root>/poimen-schema-version        SCHEMA_VERSION; what tells a root of this adapter from any folder
    <root>/projects/p-<escaped id>/     one tantivy index (meta.json, segments) per project with chunks

An index per project is what keeps BM25 statistics (document count, average field length, document
frequencies) per project: one tenant's corpus never moves another's scores. A project without a
folder has no chunks. `delete_project` renames the folder to `projects/deleted-p-<escaped id>-<random>`
(one atomic step) and then removes it; a removal cut short is finished at the next open.

Folder names (`app.engines.tantivy_folder_names`): project ids are `[A-Za-z0-9._-]{1,64}` and
case-sensitive, and a folder name holds no uppercase letter (`Acme` is `p-+acme`, `acme` is `p-acme`), so
two projects never share a folder on a file system that ignores case (macOS, Windows). The `p-` prefix
makes every name safe (no `.` or `..`) and keeps deleted folders apart.

Versions before 3 kept every project in one index at the root (`meta.json` in the root itself);
version 3 filed tags as written, not their keys. A root of an older version is emptied and recreated
at open: PostgreSQL is the source of truth, and the service re-queues every project. That refill is owed
until the service has queued every project (`REFILL_PENDING_FILE`, written before anything is deleted and
removed by `refill_queued`): a start that dies between emptying the root and queueing the last project
(killed, or PostgreSQL failing) is followed by one that queues them all again, where the next start found
a current, empty root and queued nothing, its lexical leg answering nothing for good. (Version 7 renamed a
version 6 root's folders in place, since its files were unchanged; version 8 analyzes text otherwise, so
every older root is rebuilt.) A root of a newer version is refused rather than downgraded (an older version
would read `p-+acme` as a project `+acme` holding no document, and prune it), and a root holding some
other tantivy index, or other files, is never touched.
"""

from __future__ import annotations

import json
import logging
import shutil
import uuid
from typing import TYPE_CHECKING, Final

from app.engines.tantivy_folder_names import project_folder_name, project_of_folder_name
from app.engines.tantivy_schema import DOCUMENT_KEY, PAYLOAD, SCHEMA_VERSION, SCHEMA_VERSION_FILE

if TYPE_CHECKING:
    from pathlib import Path

logger = logging.getLogger(__name__)

PROJECTS_FOLDER: Final = "projects"
DELETED_FOLDER_PREFIX: Final = "deleted-"
INDEX_META_FILE: Final = "meta.json"  # tantivy writes it when it creates an index; it lists the segments
REFILL_PENDING_FILE: Final = "poimen-refill-pending"
"""Present while the projects of an emptied root are not all queued for indexing from PostgreSQL yet."""


def project_folder(root: Path, project_id: str) -> Path:
    """The folder of `project_id`'s index under `root` (it may not exist: the project has no chunks)."""
    return root / PROJECTS_FOLDER / project_folder_name(project_id)


def project_folder_ids(root: Path) -> list[str]:
    """The project ids that have a folder under `root`, sorted (deleted folders and other names left out)."""
    folders = root / PROJECTS_FOLDER
    if not folders.is_dir():
        return []
    listed = ((project_of_folder_name(entry.name), entry) for entry in folders.iterdir())
    return sorted(project_id for project_id, entry in listed if project_id is not None and entry.is_dir())


def folder_identity(path: Path) -> tuple[int, int]:
    """(device, inode) of `path`: what tells the folder opened from another one put at the same path."""
    stat = path.stat()
    return stat.st_dev, stat.st_ino


def still_attached(path: Path, identity: tuple[int, int] | None, marker: str) -> bool:
    """Whether `path` is still the folder of `identity` and still holds its `marker` file."""
    try:
        return folder_identity(path) == identity and (path / marker).is_file()
    except OSError:
        return False


def prepare_root(root: Path) -> bool:
    """Make `root` a root of this version (creating it when missing); True when it owes a refill.

    It owes one when an older layout was emptied now, or at an earlier open whose refill was never queued
    (`refill_queued` was not called since).

    Raises:
        ValueError: `root` holds an index of a newer version, another tantivy index, or unknown files, or is a file.
        OSError: the folder cannot be read or written.
    """
    if root.exists() and not root.is_dir():
        # mkdir's own "[Errno 17] File exists" read as if the folder were fine.
        msg = "Not a directory (a file has its name)"
        raise ValueError(msg)
    root.mkdir(parents=True, exist_ok=True)
    pending = (root / REFILL_PENDING_FILE).is_file()
    version = stored_root_version(root)
    if version is not None and version > SCHEMA_VERSION:
        msg = f"it was written by a newer version (schema {version}, this one reads {SCHEMA_VERSION})"
        raise ValueError(msg)
    recreated = version is not None and version < SCHEMA_VERSION
    if recreated:
        (root / REFILL_PENDING_FILE).touch()  # first: a crash from here on still owes the refill
        _empty_older_root(root)
        # The service queues every project for indexing from PostgreSQL (app.wiring.engines) and says so.
        logger.warning("the lexical index in %s had an older schema (%d) and was recreated empty", root, version)
    elif version is None and any(entry.name != REFILL_PENDING_FILE for entry in root.iterdir()):
        msg = "it holds files that are no lexical index of this schema"
        raise ValueError(msg)
    if version != SCHEMA_VERSION:
        (root / PROJECTS_FOLDER).mkdir(exist_ok=True)
        (root / SCHEMA_VERSION_FILE).write_text(f"{SCHEMA_VERSION}\n", encoding="ascii")
    _finish_deletions(root)
    return recreated or pending


def refill_queued(root: Path) -> None:
    """Record that every project of `root` was queued for indexing again: it owes no refill any more."""
    (root / REFILL_PENDING_FILE).unlink(missing_ok=True)


def stored_root_version(root: Path) -> int | None:
    """The `SCHEMA_VERSION` that wrote `root`; None when it holds nothing of this adapter (e.g. empty).

    A root with `meta.json` is the one-index layout of versions 1-2: it counts as this adapter's when its
    schema has the `payload` and `document_key` fields, and as version 1 when the version file is missing.

    Raises:
        ValueError: the version file holds no number, or the root holds another tantivy index.
    """
    try:
        stored = json.loads((root / INDEX_META_FILE).read_text())
    except FileNotFoundError:
        stored = None
    except ValueError as error:
        msg = f"its {INDEX_META_FILE} cannot be read: {error}"
        raise ValueError(msg) from error
    if stored is not None:
        try:
            names = {field["name"] for field in stored["schema"]}
        except (KeyError, TypeError) as error:
            msg = f"its {INDEX_META_FILE} lists no schema"
            raise ValueError(msg) from error
        if not {PAYLOAD, DOCUMENT_KEY} <= names:
            msg = "it holds a tantivy index of another schema"
            raise ValueError(msg)
    try:
        return int((root / SCHEMA_VERSION_FILE).read_text(encoding="ascii").strip())
    except FileNotFoundError:
        return 1 if stored is not None else None


def remove_project_folder(root: Path, project_id: str) -> None:
    """Take the project's folder out of the layout in one rename, then delete it; no folder is fine."""
    folder = project_folder(root, project_id)
    doomed = root / PROJECTS_FOLDER / f"{DELETED_FOLDER_PREFIX}{folder.name}-{uuid.uuid4().hex}"
    try:
        folder.rename(doomed)
    except FileNotFoundError:
        return
    shutil.rmtree(doomed)


def _finish_deletions(root: Path) -> None:
    """Delete what a `remove_project_folder` cut short (a crash between its rename and its removal) left."""
    for entry in (root / PROJECTS_FOLDER).iterdir():
        if entry.name.startswith(DELETED_FOLDER_PREFIX):
            shutil.rmtree(entry, ignore_errors=True)


def _empty_older_root(root: Path) -> None:
    """Delete what an older version filed in `root` (its files and `projects/`), keeping the folder (a mount point?).

    Any other folder inside is no index's: it is refused rather than deleted.
    """
    entries = list(root.iterdir())
    for entry in entries:
        if entry.is_dir() and entry.name != PROJECTS_FOLDER:
            msg = f"{entry} is a folder; an index folder of an older version holds only files and {PROJECTS_FOLDER}/"
            raise OSError(msg)
    for entry in entries:
        if entry.is_dir():
            shutil.rmtree(entry)
        elif entry.name != REFILL_PENDING_FILE:
            entry.unlink()
