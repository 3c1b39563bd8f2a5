"""Whether this process can use `POIMEN_DATA_DIR`: what a command says before it starts anything there."""

from __future__ import annotations

import errno
import os
import tempfile
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.config import Settings


def unwritable_data_dir(settings: Settings) -> str | None:
    """Why `POIMEN_DATA_DIR` (or its `postgres`/`lexical` folders) cannot be written by this process, or None.

    Read-only, another user's, immutable, or a file in the way. A probe file with no name (`O_TMPFILE` where
    the system has it) is opened in each folder there is; the folder is created when missing, as a start would.
    """
    folder = settings.poimen_data_dir
    probed = folder
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for probed in (folder, folder / "postgres", folder / "lexical"):
            if probed != folder and probed.exists() and not probed.is_dir():  # a file where a start puts its folder
                raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(probed))
            if probed == folder or probed.is_dir():
                with tempfile.TemporaryFile(dir=probed):
                    pass
    except OSError as error:
        return (
            f"cannot use POIMEN_DATA_DIR {probed}: {os_reason(error)};"
            " make it a folder this user can write, or set POIMEN_DATA_DIR to one"
        )
    return None


def no_embedded_data(settings: Settings) -> str | None:
    """Why the embedded default has nothing to read (no database under POIMEN_DATA_DIR yet), or None.

    Raises:
        NotADirectoryError: a file is where POIMEN_DATA_DIR or its `postgres` folder goes (as a start raises it:
            "no data there; ingest first" sent the user to an ingest that failed on it).
    """
    if settings.database_url is not None:
        return None
    for folder in (settings.poimen_data_dir, settings.embedded_postgres_dir):
        if folder.exists() and not folder.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(folder))
    # PG_VERSION: initdb's first file; an empty folder (a failed first start, a restore not yet done) holds nothing.
    if (settings.embedded_postgres_dir / "PG_VERSION").is_file():
        return None
    return (
        f"no data under {settings.poimen_data_dir} (POIMEN_DATA_DIR): nothing was ingested there; "
        "check the folder, or ingest first"
    )


def os_reason(error: OSError) -> str:
    """Why a path could not be used, in the system's words; but a file where a folder must be says so.

    `mkdir` of a folder whose name a file holds says "File exists", which reads as if the folder were fine; a
    folder refused as "Not a directory" is said to be a file too when it is one (not when a file is above it).
    """
    a_file_in_its_place = isinstance(error, FileExistsError) or (
        error.errno == errno.ENOTDIR and error.filename and os.path.lexists(error.filename)
    )
    if a_file_in_its_place and error.filename and not os.path.isdir(error.filename):  # noqa: PTH112 - a str or bytes name
        return f"{os.strerror(errno.ENOTDIR)} (a file has its name)"
    return error.strerror or str(error)
