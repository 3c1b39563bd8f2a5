"""A key given twice in one object of a JSON body is a 400 naming the key and where it is.

JSON leaves a repeated key's meaning open (RFC 8259, section 4), and msgspec, which decodes every body
here and in Litestar, keeps the last one without a word (msgspec#648: it has no option to refuse them):
`{"query": "a", "query": "b"}` searched for "b", and a second `tags` in `filters` replaced the first.
The standard library's decoder hands each object's pairs to a hook before it builds the object, which
counts them; numbers are left as text there (no number is needed, and none is then over a limit).
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

from app.domain.errors import InvalidInputError

_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class _RepeatedKeyError(Exception):
    """Raised by the hook to stop decoding at the first object with a repeated key."""


class _Pairs(list[tuple[str, Any]]):
    """An object's pairs as written, repeats kept: what the path of a repeated key is found in."""


def refuse_repeated_keys(body: bytes) -> None:
    r"""An `InvalidInputError` naming the path (`filters.tags`, `documents[1].metadata.owner`) of a repeated key.

    `body` has been decoded by msgspec already: it is valid JSON. Keys are compared as decoded, so
    `"query"` and `"\u0071uery"` are one key. Raises `RecursionError` for a body nested past what the
    standard library's decoder reads (about 1,000 levels), as msgspec does.
    """
    try:
        json.loads(body, object_pairs_hook=_refuse_repeats, parse_int=str, parse_float=str)
    except _RepeatedKeyError:
        path, key = _first_repeat(json.loads(body, object_pairs_hook=_Pairs, parse_int=str, parse_float=str), "")
        msg = f"{path}: the key {json.dumps(key, ensure_ascii=False)} is given twice in one object; give it once"
        raise InvalidInputError(msg, field=path) from None


def _refuse_repeats(pairs: list[tuple[str, Any]]) -> None:
    """The objects are not kept (None in their place): only their keys are looked at."""
    if len(pairs) > 1 and len({key for key, _ in pairs}) != len(pairs):
        raise _RepeatedKeyError


def _first_repeat(value: object, path: str) -> tuple[str, str]:
    """The path and key of the first repeated key in `value`, in the order of the body; ("", "") if none."""
    if isinstance(value, _Pairs):
        seen: set[str] = set()
        for key, item in value:
            step = f"{path}.{key}" if _NAME.fullmatch(key) else f"{path}[{json.dumps(key, ensure_ascii=False)}]"
            step = step.removeprefix(".")
            if key in seen:
                return step, key
            seen.add(key)
            found = _first_repeat(item, step)
            if found[0]:
                return found
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found = _first_repeat(item, f"{path}[{index}]")
            if found[0]:
                return found
    return "", ""
