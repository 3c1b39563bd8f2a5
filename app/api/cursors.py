"""Opaque page cursors: a small JSON object, base64url-encoded without padding.

Clients pass `next_cursor` back unchanged; its contents are not an interface. Each cursor names its
kind (`documents` or `search`), so one endpoint's cursor is refused by the other; anything that does not
decode is a 400 naming the parameter it came in.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any, Final

from app.domain.errors import InvalidInputError

KIND_KEY: Final = "k"
MAX_CURSOR_CHARS: Final = 4096


def encode_cursor(kind: str, values: dict[str, Any]) -> str:
    """The cursor for `values` of this `kind`."""
    raw = json.dumps({KIND_KEY: kind, **values}, separators=(",", ":"), sort_keys=True).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str, *, kind: str, field: str = "cursor") -> dict[str, Any]:
    """The values of a cursor of this `kind`; `InvalidInputError(field=field)` for anything else."""
    problem = f"{field} is not a cursor this endpoint returned"
    if not cursor or len(cursor) > MAX_CURSOR_CHARS:
        raise InvalidInputError(problem, field=field)
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        values = json.loads(raw)
    except (binascii.Error, ValueError, RecursionError):  # RecursionError: a forged "[[[[..." nests too deep
        raise InvalidInputError(problem, field=field) from None
    if not isinstance(values, dict) or values.pop(KIND_KEY, None) != kind:
        raise InvalidInputError(problem, field=field)
    return values


def keyset_after(cursor: str | None, *, kind: str) -> str | None:
    """The id a keyset listing's cursor of this `kind` continues after; None without a cursor.

    `InvalidInputError(field="cursor")` for a cursor of another kind or shape.
    """
    if cursor is None:
        return None
    after = decode_cursor(cursor, kind=kind).get("after")
    # No stored id holds a NUL or a lone surrogate: PostgreSQL refuses both as text, which read as an outage.
    if not isinstance(after, str) or "\x00" in after or not _is_utf8(after):
        msg = "cursor is not a cursor this endpoint returned"
        raise InvalidInputError(msg, field="cursor")
    return after


def _is_utf8(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True
