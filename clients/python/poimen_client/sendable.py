"""What a request can carry: its text checked and its JSON body encoded, naming the field that cannot be sent.

The encoders name no field: a surrogate code point (half of a UTF-16 pair, as `json.loads` of a lone escape
or a `surrogateescape` decode leaves in a str) was the UTF-8 codec's bare `UnicodeEncodeError`, raised from
deep in msgspec, httpx or urllib. A body that fails to encode is searched again part by part for the one to
name, so a body that encodes pays nothing more.
"""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING, Final

import msgspec

if TYPE_CHECKING:
    from collections.abc import Iterator

_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_SHOWN_KEY_CHARS: Final = 80
"""How much of a refused metadata key a message quotes: enough to recognise it."""
_NOT_SENT: Final = "nothing was sent"


def checked_text(field: str, text: str) -> str:
    """`text`, which UTF-8 can encode.

    Raises:
        ValueError: `text` holds a surrogate code point; the message names `field` and where.
    """
    surrogate = _surrogate_in(text)
    if surrogate:
        msg = f"{field} holds {surrogate}, which UTF-8 cannot encode: {_NOT_SENT}"
        raise ValueError(msg)
    return text


def encoded_json(body: object) -> bytes:
    """`body` as JSON.

    Raises:
        ValueError: a string in it (a value or a key) holds a surrogate code point; the message names
            the field, e.g. `documents[1].metadata.notes[0]`.
    """
    try:
        return msgspec.json.encode(body)
    except UnicodeEncodeError:
        refusal = _refusal(body)
        if refusal is None:  # not found again: the encoder's own words are all there is
            raise
        raise refusal from None  # the encoder's traceback names no field; this does


def _refusal(body: object) -> ValueError | None:
    """Why `body` cannot be encoded, naming the innermost part that cannot; None if no part is to blame."""
    path, value = "", body
    while True:
        if isinstance(value, dict):
            for key in value:
                surrogate = _surrogate_in(key) if isinstance(key, str) else None
                if surrogate:
                    msg = f"{_named(path)} has a key, {_shown(key)}, holding {surrogate}, which UTF-8 cannot encode"
                    return ValueError(f"{msg}: {_NOT_SENT}")
        failing = next(((p, part) for p, part in _parts(path, value) if not _encodes(part)), None)
        if failing is None:
            break
        path, value = failing
    surrogate = _surrogate_in(value) if isinstance(value, str) else None
    if surrogate:
        return ValueError(f"{_named(path)} holds {surrogate}, which UTF-8 cannot encode: {_NOT_SENT}")
    return None


def _surrogate_in(text: str) -> str | None:
    found = _SURROGATE.search(text)
    return f"a surrogate code point (U+{ord(found.group()):04X} at index {found.start()})" if found else None


def _encodes(value: object) -> bool:
    try:
        msgspec.json.encode(value)
    except UnicodeEncodeError:
        return False
    return True


def _parts(path: str, value: object) -> Iterator[tuple[str, object]]:
    """Each part of `value` msgspec encodes separately, with its path: fields, items, elements."""
    if isinstance(value, msgspec.Struct):
        for struct_field in msgspec.structs.fields(value):
            yield _joined(path, struct_field.encode_name), getattr(value, struct_field.name)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for data_field in dataclasses.fields(value):
            yield _joined(path, data_field.name), getattr(value, data_field.name)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield _joined(path, key), item
    elif isinstance(value, list | tuple | set | frozenset):
        for index, item in enumerate(value):
            yield f"{path}[{index}]", item


def _joined(path: str, key: object) -> str:
    """`path.key` for a name, `path['a key']` for any other key."""
    if isinstance(key, str) and key.isidentifier():
        return f"{path}.{key}" if path else key
    return f"{path}[{_shown(key)}]"


def _shown(key: object) -> str:
    shown = repr(key)  # escapes a surrogate, a line break, a control character
    return shown if len(shown) <= _SHOWN_KEY_CHARS else f"{shown[:_SHOWN_KEY_CHARS]}..."


def _named(path: str) -> str:
    return path or "the request body"
