"""Times kept to the microsecond: a fraction's digits past the sixth are dropped, never rounded.

msgspec rounds a time's fraction to the microsecond, so `2024-12-31T23:59:59.9999999Z` became
2025-01-01T00:00:00Z: another day, month and year, out of a range that held the time as written (and past
year 9999 a time it could not hold). Truncated, it stays in its second, as front matter's `date` does
(`datetime.fromisoformat`), and a bound and a time written at one instant stay equal. msgspec decodes times
as usual; their texts are read again only when a raw body may hold one with 7 or more fraction digits.

One rule for every time a request carries: a JSON body's (its type lists where they are, `TimePaths`) and a
query string's (`app.api.strict_queries.request_time`) are truncated alike, before anything rounds them.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Final, TypeVar

import msgspec

TimePaths = tuple[tuple[str, ...], ...]
"""Where a JSON body holds times: keys from its root, `*` for each item of a list (`("queries", "*", "as_of")`)."""
BodyType = TypeVar("BodyType")

_PAST_MICROSECONDS: Final = re.compile(r"(\.\d{6})\d+")
_SEVEN_DIGITS_AFTER_A_POINT: Final = re.compile(rb"\.\d{7}")
_ESCAPED_POINT_OR_DIGIT: Final = re.compile(rb"\\u00(?:2[eE]|3\d)")


def may_hold_past_microseconds(body: bytes) -> bool:
    r"""Whether a raw JSON body may hold a time with digits past the microsecond (no: msgspec's decoding stands).

    Yes when it has 7 digits after a point, or a point or digit escaped (`\u0037`). Two searches, the second
    only after a plain `\u00` is found: one pattern of both took about 1.4 times as long on a search body.
    """
    return _SEVEN_DIGITS_AFTER_A_POINT.search(body) is not None or (
        b"\\u00" in body and _ESCAPED_POINT_OR_DIGIT.search(body) is not None
    )


def truncated_time_text(text: str) -> str:
    """`text` with its fraction's digits past the sixth dropped; unchanged when it has none such."""
    return _PAST_MICROSECONDS.sub(r"\1", text, count=1)


def retruncated(decoded: datetime | None, text: str | None, time_type: Any = datetime) -> datetime | None:  # noqa: ANN401 - a datetime type, constrained (`AsOf`) or not
    """`decoded`, msgspec's decoding of `text`; or, when `text` has digits past the microsecond, `text` truncated.

    `time_type` is the field's type, so a constrained one (an offset required) is checked as msgspec did.
    A text that is no RFC 3339 time once truncated (a query string's `-4.0215298293e-182`, which the framework
    read as seconds since 1970) keeps the framework's decoding: re-reading it raised, a 500.
    """
    if text is None or _PAST_MICROSECONDS.search(text) is None:
        return decoded
    try:
        time: datetime = msgspec.convert(truncated_time_text(text), time_type)
    except msgspec.ValidationError:
        return decoded
    return time


def truncate_times_at(loaded: Any, paths: TimePaths) -> None:  # noqa: ANN401 - a JSON value, as decoded
    """Truncate, in place, each time text of a decoded (untyped) JSON value at `paths`; anything else is left."""
    for path in paths:
        _truncate_at(loaded, path)


def _truncate_at(node: Any, path: tuple[str, ...]) -> None:  # noqa: ANN401 - a JSON value, as decoded
    head, rest = path[0], path[1:]
    if head == "*":
        children: list[tuple[Any, Any]] = list(enumerate(node)) if isinstance(node, list) else []
    else:
        children = [(head, node[head])] if isinstance(node, dict) and head in node else []
    for key, child in children:
        if rest:
            _truncate_at(child, rest)
        elif isinstance(child, str):
            node[key] = truncated_time_text(child)


def decoded_times_truncated(body: bytes, body_type: type[BodyType], paths: TimePaths) -> BodyType:
    """`body` decoded strictly as `body_type`; a time that msgspec rounds past year 9999 is truncated first.

    `9999-12-31T23:59:59.9999999Z` truncated is the last microsecond of year 9999, but msgspec rounds it
    to year 10000 and refuses it as no date-time. Only a body that fails to decode and may hold such a time
    is decoded again, as plain JSON with the texts at `paths` truncated. Times that decode are rounded
    still: the caller truncates them (`retruncated`, or `truncate_times_at` on what Litestar converts).
    """
    try:
        return msgspec.json.decode(body, type=body_type, strict=True)
    except msgspec.ValidationError:
        if not paths or not may_hold_past_microseconds(body):
            raise
    loaded = msgspec.json.decode(body)
    truncate_times_at(loaded, paths)
    return msgspec.convert(loaded, body_type, strict=True)
