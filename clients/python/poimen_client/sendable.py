"""What a request can carry: its text checked and its JSON body encoded, naming the field that cannot be sent.

The encoders name no field: a surrogate code point (half of a UTF-16 pair, as `json.loads` of a lone escape
or a `surrogateescape` decode leaves in a str) was the UTF-8 codec's bare `UnicodeEncodeError`, raised from
deep in msgspec, httpx or urllib; metadata JSON has no form for (a `complex`, an object of the caller's, a
tuple key) msgspec's `TypeError` naming only the type; metadata that holds itself a `RecursionError`. A
body that fails to encode is searched again part by part for the one to name, so a body that encodes pays
nothing more.

msgspec checks no field of a Struct when it is built, so `SearchQuery(query=123)` or `Document(tags="ops")` went
out as given: the service's 400 came back for it, or (`limit="10"` in a query string) it was read as something
else. `checked_struct` reads a request Struct back from its own JSON against its annotations and names the field
msgspec refuses.
"""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING, Final, TypeVar

import msgspec

if TYPE_CHECKING:
    from collections.abc import Iterator

StructT = TypeVar("StructT", bound=msgspec.Struct)

_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_VALIDATION: Final = re.compile(r"(?P<reason>.*?)(?: - at `\$(?P<path>.*)`)?", re.DOTALL)
_MISMATCH: Final = re.compile(r"Expected `(?P<expected>[^`]*)`, got `(?P<got>[^`]*)`")
_PYTHON_TYPE_NAMES: Final = {"array": "list", "object": "dict", "null": "None"}
"""msgspec names JSON's types in its errors; a caller passed Python values."""
_SHOWN_KEY_CHARS: Final = 80
"""How much of a refused metadata key a message quotes: enough to recognise it."""
_SHOWN_PATH_CHARS: Final = 200
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


def checked_struct(value: StructT, *, path: str = "") -> StructT:
    """`value` read back from its own JSON against its type's annotations (a time given as RFC 3339 text a datetime).

    `path` is where `value` sits in the request (`queries[1]`), for the message. A value JSON has no form for
    is left to `encoded_json`, which names it when the request body is encoded.

    Raises:
        TypeError: a field holds a value of another type than its annotation's; the message names the field
            and both types, e.g. `filters.tags[1] must be str, got int`.
        ValueError: a field holds a value of the right type that its annotation refuses (a strategy no
            `Literal` lists, text that is no RFC 3339 time).
    """
    try:
        encoded = msgspec.json.encode(value)
    except (UnicodeEncodeError, TypeError, RecursionError):
        return value
    try:
        return msgspec.json.decode(encoded, type=type(value))
    except msgspec.ValidationError as error:
        raise _field_refusal(path, str(error)) from None  # msgspec's words name JSON's types and a `$` path
    except RecursionError:  # metadata nested as deep as the encoder goes: nothing else to check in it
        return value


def encoded_json(body: object) -> bytes:
    """`body` as JSON.

    Raises:
        ValueError: a string in it (a value or a key) holds a surrogate code point, or it holds itself
            (a cycle) or nests deeper than msgspec goes; the message names the field, e.g.
            `documents[1].metadata.notes[0]`.
        TypeError: a value or a key in it is of a type JSON has no form for; the message names the field
            and the type.
    """
    try:
        return msgspec.json.encode(body)
    except (UnicodeEncodeError, TypeError, RecursionError) as error:
        refusal = _refusal(body, error)
        if refusal is None:  # not found again: the encoder's own words are all there is
            raise
        raise refusal from None  # the encoder's traceback names no field; this does


def _refusal(body: object, error: Exception) -> ValueError | TypeError | None:
    """Why `body` cannot be encoded, naming the innermost part that cannot; None if no part is to blame."""
    path, value = "", body
    paths_by_id = {id(body): ""}  # the containers descended through: a part among them is a cycle
    while True:
        refused_key = _key_refusal(path, value)
        if refused_key is not None:
            return refused_key
        failing = _failing_part(path, value)
        if failing is None:
            return _value_refusal(path, value, error)
        path, value, error = failing
        if id(value) in paths_by_id:
            cycle = f"{_named(path)} is {_named(paths_by_id[id(value)])} again, a cycle JSON cannot carry"
            return ValueError(f"{cycle}: {_NOT_SENT}")
        paths_by_id[id(value)] = path


def _failing_part(path: str, value: object) -> tuple[str, object, Exception] | None:
    """The first part of `value` that does not encode on its own, its path and its error."""
    for part_path, part in _parts(path, value):
        try:
            msgspec.json.encode(part)
        except (UnicodeEncodeError, TypeError, RecursionError) as error:
            return part_path, part, error
    return None


def _key_refusal(path: str, value: object) -> ValueError | TypeError | None:
    """Why a key of the dict `value` cannot be a JSON key; None if every one can (or it is no dict)."""
    if not isinstance(value, dict):
        return None
    for key in value:
        if isinstance(key, str):
            surrogate = _surrogate_in(key)
            if surrogate:
                msg = f"{_named(path)} has a key, {_shown(key)}, holding {surrogate}, which UTF-8 cannot encode"
                return ValueError(f"{msg}: {_NOT_SENT}")
            continue
        try:
            msgspec.json.encode({key: None})
        except TypeError:  # a bool, None, a tuple...: msgspec takes str-like and number-like keys only
            msg = f"{_named(path)} has a key of type {_type_name(key)}, {_shown(key)}, which JSON cannot carry"
            return TypeError(f"{msg} (keys are strings, or numbers sent as strings): {_NOT_SENT}")
    return None


def _value_refusal(path: str, value: object, error: Exception) -> ValueError | TypeError | None:
    """Why `value`, whose parts all encode, does not (`error`, msgspec's)."""
    surrogate = _surrogate_in(value) if isinstance(value, str) else None
    if surrogate:
        return ValueError(f"{_named(path)} holds {surrogate}, which UTF-8 cannot encode: {_NOT_SENT}")
    if isinstance(error, RecursionError):
        return ValueError(f"{_named(path)} nests deeper than JSON encoding goes here: {_NOT_SENT}")
    if isinstance(error, TypeError):
        msg = f"{_named(path)} is a value of type {_type_name(value)}, which has no JSON form"
        return TypeError(f"{msg} (send a str, number, bool, None, list or dict): {_NOT_SENT}")
    return None


def _field_refusal(path: str, validation_message: str) -> TypeError | ValueError:
    """The error msgspec's `validation_message` (`Expected `str`, got `int` - at `$.query``) stands for."""
    parts = _VALIDATION.fullmatch(validation_message)
    reason, field_path = (parts["reason"], parts["path"] or "") if parts else (validation_message, "")
    field = path + field_path if path else field_path.removeprefix(".")
    mismatch = _MISMATCH.fullmatch(reason)
    if mismatch:
        expected, got = (_python_type_names(mismatch[name]) for name in ("expected", "got"))
        return TypeError(f"{_named(field)} must be {expected}, got {got}: {_NOT_SENT}")
    return ValueError(f"{_named(field)} is not one the service takes: {reason[:1].lower()}{reason[1:]}: {_NOT_SENT}")


def _python_type_names(json_types: str) -> str:
    """`int | null` as `int | None`, `array` as `list`."""
    return " | ".join(_PYTHON_TYPE_NAMES.get(name, name) for name in json_types.split(" | "))


def _surrogate_in(text: str) -> str | None:
    found = _SURROGATE.search(text)
    return f"a surrogate code point (U+{ord(found.group()):04X} at index {found.start()})" if found else None


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
    if len(path) > _SHOWN_PATH_CHARS:  # metadata nested thousands deep: `metadata.deep[0][0]...`
        return f"{path[:_SHOWN_PATH_CHARS]}..."
    return path or "the request body"


def _type_name(value: object) -> str:
    """`complex` for a builtin, `package.module.Class` for any other type."""
    kind = type(value)
    return kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
