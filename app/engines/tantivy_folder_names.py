"""The name of a project's folder in the embedded lexical index: one per project id, even where case is ignored.

Project ids are case-sensitive (`Acme` and `acme` are two projects, `app.domain.project_ids`), but the file
systems of the laptops the embedded default is for are not: macOS's default APFS and Windows' NTFS open
`p-acme` for `p-Acme`. A folder named after the id as written made those two projects share one index (their
BM25 statistics mixed; deleting one deleted the other's chunks).

So a folder name holds no uppercase letter: each one is written as `+` and the letter in lowercase
(`Acme` is `p-+acme`). `+` is outside the id alphabet (`[A-Za-z0-9._-]`), so a name reads back to exactly
one id, and a name that holds no uppercase letter is its own case folding: two ids never give names equal
under case folding. Windows also drops a trailing `.` from a name (`p-a.` would open `p-a`), so a name
ending in `.` gets a closing `+`. Not `~`, which Windows puts in the short (8.3) names it makes up for long
ones; `+` is allowed on every file system the service runs on and means nothing to a shell.

An id of lowercase letters, digits, `_`, `-` and inner dots keeps the name it always had (`p-acme`).
"""

from __future__ import annotations

from typing import Final

from app.domain.project_ids import is_project_id

PROJECT_FOLDER_PREFIX: Final = "p-"
ESCAPE: Final = "+"
"""Outside the project id alphabet: before a letter, that letter is uppercase; last, after a `.`, it closes the name."""


def project_folder_name(project_id: str) -> str:
    """The folder name of `project_id` (a valid id: `app.domain.project_ids.is_project_id`).

    The name holds no uppercase letter and does not end in `.`; `project_of_folder_name` reads it back.
    """
    escaped = "".join(
        f"{ESCAPE}{character.lower()}" if "A" <= character <= "Z" else character for character in project_id
    )
    closing = ESCAPE if escaped.endswith(".") else ""
    return f"{PROJECT_FOLDER_PREFIX}{escaped}{closing}"


def project_of_folder_name(name: str) -> str | None:
    """The project id whose folder is named `name`; None for any other name (not one `project_folder_name` gives)."""
    if not name.startswith(PROJECT_FOLDER_PREFIX):
        return None
    escaped = name.removeprefix(PROJECT_FOLDER_PREFIX)
    if escaped.endswith(f".{ESCAPE}"):
        escaped = escaped.removesuffix(ESCAPE)
    characters: list[str] = []
    uppercase_next = False
    for character in escaped:
        if uppercase_next:
            if not "a" <= character <= "z":
                return None
            characters.append(character.upper())
            uppercase_next = False
        elif character == ESCAPE:
            uppercase_next = True
        else:
            characters.append(character)
    project_id = "".join(characters)
    # The one name of the id, and no other: an unescaped uppercase letter (a folder named before names were
    # escaped) or a dangling `+` is not it.
    if uppercase_next or not is_project_id(project_id) or project_folder_name(project_id) != name:
        return None
    return project_id
