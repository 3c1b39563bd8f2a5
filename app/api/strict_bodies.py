"""JSON request bodies are decoded strictly: `"explain": 0` or `"limit": "5"` is a 400, as the API document says.

Litestar converts a handler's `data` leniently (msgspec `strict=False`: 0/1 and "true" pass as booleans,
numeric strings as numbers), which accepts bodies the OpenAPI document declares invalid. The
`before_request` hook here decodes the body against the handler's body type with msgspec's strict JSON
rules first; Litestar's own conversion then only ever sees bodies that already conform.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import msgspec
import msgspec.inspect
from litestar import Request

from app.api.bounded_lists import MAX_SHAPE_DEPTH, refuse_over_bound_lists
from app.api.json_keys import refuse_repeated_keys
from app.api.microsecond_times import TimePaths, decoded_times_truncated, may_hold_past_microseconds, truncate_times_at
from app.domain.errors import InvalidInputError
from app.domain.project_ids import PROJECT_ID_PATTERN, PROJECT_ID_RULE

if TYPE_CHECKING:
    from collections.abc import Sequence

_DATETIME_ERROR: Final = "Invalid RFC3339 encoded datetime"
DATETIME_HINT: Final = (
    "an RFC 3339 date-time such as 2024-05-08T12:00:00Z: a day of the calendar, a time, an offset within 24 hours"
    " (a date alone is not one)"
)
# msgspec's decoder recurses per nesting level and stops at the interpreter's limit (about 1,000 levels).
_LONE_HIGH_SURROGATE: Final = re.compile(rb"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})")
_LONE_LOW_SURROGATE: Final = re.compile(rb"(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}")
_MSGSPEC_PREFIX: Final = "JSON is malformed: "
EMPTY_BODY: Final = "the request body is empty: expected a JSON object"
TOO_DEEP: Final = "the JSON body nests too deeply (arrays and objects within one another, about 1,000 levels)"


WRITE_METHODS: Final = frozenset({"POST", "PUT", "PATCH", "DELETE"})
READS_BODY_OPT_KEY: Final = "reads_body"
READS_BODY: Final = {READS_BODY_OPT_KEY: True}
"""Route `opt` of a write that reads its request body itself (no `data` parameter): its body is not refused."""


_AT_PATH: Final = re.compile(r"(?P<head>.*) - at `\$\.?(?P<path>[^`]*)`", re.DOTALL)
_READABLE: Final = (
    (re.compile(r"Expected `str` of length >= 1"), "must not be empty"),
    (re.compile(r"Expected `str` of length >= (\d+)"), r"must be at least \1 characters long"),
    (re.compile(r"Expected `str` of length <= (\d+)"), r"must be at most \1 characters long"),
    (re.compile(r"Expected `array` of length >= 1"), "must hold at least one item"),
    (re.compile(r"Expected `array` of length >= (\d+)"), r"must hold at least \1 items"),
    (re.compile(r"Expected `array` of length <= (\d+)"), r"must hold at most \1 items"),
    (re.compile(r"Expected `array` of at most length (\d+)"), r"must hold at most \1 items"),
    (re.compile(r"Expected `(?:int|float)` >= (\S+)"), r"must be at least \1"),
    (re.compile(r"Expected `(?:int|float)` <= (\S+)"), r"must be at most \1"),
    (re.compile(r"Expected `(?:int|float)` > (\S+)"), r"must be greater than \1"),
    (re.compile(r"Expected `(?:int|float)` < (\S+)"), r"must be less than \1"),
    (re.compile(r"Expected `([^`]+)`, got `([^`]+)`"), r"expected \1, got \2"),
    (re.compile(r"Object contains unknown field `([^`]+)`"), r"unknown field `\1`"),
    (re.compile(r"Object missing required field `([^`]+)`"), r"missing required field `\1`"),
    (re.compile(re.escape(_DATETIME_ERROR)), f"expected {DATETIME_HINT}"),
    (
        re.compile(r"Expected `datetime` with a timezone component"),
        "expected a date-time with an offset or Z (2024-05-08T12:00:00Z): one without is not taken as UTC here",
    ),
    # `Level` of the search filters (`app.api.search_requests`).
    (re.compile(re.escape("Expected `str` matching regex '^L[0-6]$'")), "must be a level, L0 to L6"),
    (re.compile(r"Number out of range"), "a number is past the range of a 64-bit float (about 1.8e308 either way)"),
    # `NO_NUL_PATTERN` of the routes (`app.api.project_routes`): PostgreSQL text cannot hold U+0000.
    (re.compile(r"Expected `str` matching regex '\^\[\^\\+u0000\]\*\$'"), "must not contain a NUL character"),
    # msgspec quotes the pattern as Python's repr does (backslashes doubled).
    (re.compile(re.escape(f"Expected `str` matching regex {PROJECT_ID_PATTERN!r}")), f"must be {PROJECT_ID_RULE}"),
)
"""Msgspec's wording of each constraint it checks, and how a person reads it ("must not be empty")."""


def readable_validation_message(message: str) -> str:
    """Msgspec's message in words, the input it blames first: `id: must be at most 256 characters long`.

    msgspec says "Expected `str` of length <= 256 - at `$.id`"; an unknown field keeps its backquoted
    name ("queries[0]: unknown field `project`"). A message of no known form is returned as it came.
    """
    located = _AT_PATH.fullmatch(message)
    head, path = (located["head"], _addressable(located["path"])) if located else (message, "")
    for pattern, words in _READABLE:
        if pattern.fullmatch(head):
            head = pattern.sub(words, head, count=1)
            break
    return f"{path}: {head}" if path else head


def _addressable(path: str) -> str:
    """`path` up to the first value of an object with free keys, which msgspec writes `[...]` (`metadata[...]`)."""
    return path.split("[...]", 1)[0]


def field_of_validation_error(message: str) -> str | None:
    """The input a msgspec validation message blames, as a dotted path without the `$.` root.

    msgspec says "... - at `$.documents[0].id`"; an unknown field is named in the message
    ("Object contains unknown field `colour` - at `$.documents[0]`").
    """
    unknown = "unknown field `"
    if unknown in message:
        name = message.split(unknown, 1)[1].split("`", 1)[0]
        path = message.split("at `$", 1)[1].rstrip("`").lstrip(".") if "at `$" in message else ""
        return f"{path}.{name}" if path else name
    marker = "at `$."
    if marker in message:
        return _addressable(message.split(marker, 1)[1].rstrip("`"))
    if "missing required field `" in message:
        return message.split("missing required field `", 1)[1].split("`", 1)[0]
    return None


def invalid_input_of(
    error: msgspec.ValidationError,
    *,
    default_field: str | None = None,
    body_type: type[msgspec.Struct] | None = None,
    body: bytes = b"",
) -> InvalidInputError:
    """The 400 for a msgspec validation error: its message made readable, the field it blames (else `default_field`).

    With `body_type`, a value outside a field's fixed set of strings names that set (`unknown_choice`), and an
    unknown field the fields its object takes. With `body`, a value that breaks a bound is shown (`received`).
    """
    message = str(error)
    field = field_of_validation_error(message) or default_field
    unlisted = _UNLISTED_CHOICE.fullmatch(message)
    shape = _shape(body_type) if body_type is not None else None
    if unlisted is not None and field is not None and shape is not None:
        choices = shape.choices.get(_ITEM_INDEX.sub("[*]", field))
        if choices is not None:
            return unknown_choice(field, unlisted["value"], choices)
    words = readable_validation_message(message)
    if _UNKNOWN_FIELD_AT.fullmatch(message) and field is not None and shape is not None:
        takes = shape.fields.get(_ITEM_INDEX.sub("[*]", field.rpartition(".")[0]))
        if takes:
            words = f"{words}; it takes {', '.join(sorted(takes))}"
    elif field is not None and "got " not in words and "field `" not in words:
        shown = received(body, field)
        if shown is not None:
            words = f"{words}; got {shown}"
    return InvalidInputError(words, field=field)


_UNKNOWN_FIELD_AT: Final = re.compile(r"Object contains unknown field `[^`]+`( - at `\$[^`]*`)?", re.DOTALL)
_PATH_STEP: Final = re.compile(r"\[(\d+)\]|([^.\[\]]+)")
RECEIVED_MAX_BODY_BYTES: Final = 1024 * 1024
"""A refused body is read again to show the value it blames only up to this size (a 16 MiB ingest is not)."""
SHOWN_CHARS: Final = 40


def shown_value(value: str) -> str:
    """A text the caller sent, as a refusal shows it: quoted as Python writes it, cut after `SHOWN_CHARS`."""
    if len(value) <= SHOWN_CHARS:
        return repr(value)
    return f"{value[:SHOWN_CHARS]!r}... ({len(value)} characters)"


def received(body: bytes, field: str) -> str | None:
    """The value at `field` (`queries[2].limit`) of a JSON `body` as it was sent: `0`, `'L9'` (long texts cut).

    None for an object or an array (the message says what is wrong with it), a path not in the body, or a
    body over `RECEIVED_MAX_BODY_BYTES`.
    """
    if not body or len(body) > RECEIVED_MAX_BODY_BYTES:
        return None
    try:
        value: Any = msgspec.json.decode(body)
    except (msgspec.DecodeError, RecursionError):
        return None
    for index, name in _PATH_STEP.findall(field):
        if index and isinstance(value, list) and int(index) < len(value):
            value = value[int(index)]
        elif name and isinstance(value, dict) and name in value:
            value = value[name]
        else:
            return None
    if isinstance(value, (dict, list)):
        return None
    return shown_value(value) if isinstance(value, str) else msgspec.json.encode(value).decode()


def unknown_choice(field: str, shown_value: str, choices: Sequence[str]) -> InvalidInputError:
    """The 400 for a value outside a field's fixed set of strings, worded alike in a JSON body and a query string.

    `shown_value` is the value as Python's `repr` (and msgspec's message) writes it. The choices are listed
    sorted, as msgspec reports a `Literal`'s.
    """
    msg = f"{field}: must be one of {', '.join(sorted(choices))} (as written, lowercase); got {shown_value}"
    return InvalidInputError(msg, field=field)


_UNLISTED_CHOICE: Final = re.compile(r"Invalid enum value (?P<value>.*) - at `\$[^`]*`", re.DOTALL)
_ITEM_INDEX: Final = re.compile(r"\[\d+\]")


@dataclass(frozen=True, slots=True)
class _Shape:
    """What a body type's fields take, by path (`queries[*].fusion`): fixed sets of strings, objects' field names."""

    choices: dict[str, tuple[str, ...]]
    fields: dict[str, tuple[str, ...]]


@functools.cache
def _shape(body_type: type[msgspec.Struct]) -> _Shape:
    """Each field of `body_type` taking one of a fixed set of strings (a `Literal`), and each object's fields."""
    shape = _Shape(choices={}, fields={})

    def walk(node: msgspec.inspect.Type, path: str, depth: int) -> None:
        if depth > MAX_SHAPE_DEPTH:
            return
        if isinstance(node, msgspec.inspect.Metadata):
            walk(node.type, path, depth)
        elif isinstance(node, msgspec.inspect.UnionType):
            for member in node.types:
                walk(member, path, depth)
        elif isinstance(node, msgspec.inspect.StructType):
            shape.fields[path] = tuple(field.encode_name for field in node.fields)
            for field in node.fields:
                walk(field.type, f"{path}.{field.encode_name}" if path else field.encode_name, depth + 1)
        elif isinstance(node, msgspec.inspect.ListType):
            walk(node.item_type, f"{path}[*]", depth + 1)
        elif isinstance(node, msgspec.inspect.LiteralType):
            shape.choices[path] = tuple(str(value) for value in node.values)

    walk(msgspec.inspect.type_info(body_type), "", 0)
    return shape


async def reject_lax_json(request: Request[Any, Any, Any]) -> None:
    """Before a handler with a msgspec Struct body: a 400 naming the field if the body is not strictly valid.

    A key given twice in one object is a 400 too (`refuse_repeated_keys`): msgspec would keep the last.
    The times at the body type's `time_paths` are truncated to the microsecond, never rounded
    (`app.api.microsecond_times`), before the handler's `data` is made of them.

    An empty or malformed body is a 400 naming `body`, worded as the ingest route words it (Litestar's
    own parsing answered "Input data was truncated" titled `ClientException`, and "data: 'data'" for
    an empty body). A write that takes no body refuses one (`reject_unread_body`).
    """
    data_field = request.route_handler.parsed_data_field
    body_type = None if data_field is None else data_field.annotation
    if not (isinstance(body_type, type) and issubclass(body_type, msgspec.Struct)):
        if data_field is None:
            await reject_unread_body(request)
        return
    body = await request.body()
    if not body.strip():
        raise InvalidInputError(EMPTY_BODY, field="body")
    time_paths: TimePaths = getattr(body_type, "time_paths", ())
    try:
        refuse_over_bound_lists(body, body_type)
        decoded_times_truncated(body, body_type, time_paths)
        refuse_repeated_keys(body)
    except msgspec.ValidationError as error:
        raise invalid_input_of(error, default_field="body", body_type=body_type, body=body) from None
    except msgspec.DecodeError as error:
        raise malformed_json(error, body) from None
    except RecursionError:
        raise InvalidInputError(TOO_DEEP, field="body") from None
    if time_paths and may_hold_past_microseconds(body):
        # Litestar converts this decoding into the handler's `data`, and would round what it holds.
        truncate_times_at(await request.json(), time_paths)


async def reject_unread_body(request: Request[Any, Any, Any]) -> None:
    """A 400 naming `body` for a body sent to a route that takes none, and so would never read it.

    `DELETE /v1/projects/p` with `{"tag": "draft"}` deleted the whole project, and `DELETE
    .../documents?source_prefix=a` with the same body every document under `a/`, whatever the tag: what
    a write acts on is its path and query parameters. A read alike: `GET .../documents` with `{"tag":
    "draft"}` listed every document, `GET /memory/query` with `{"limit": 1}` answered 10 hits (RFC 9110
    9.3.1: a GET's content has no defined meaning). An empty object or `null` asks for nothing and is let
    through. A handler that reads its body itself is marked `READS_BODY`.
    """
    if request.route_handler.opt.get(READS_BODY_OPT_KEY):
        return
    if request.method not in WRITE_METHODS and not _declares_body(request):
        return  # a read without a body (nearly every one): nothing to receive
    if not _says_nothing(await request.body()):
        msg = (
            f"{request.method} {request.url.path} takes no request body: what it acts on is in its path and query "
            "parameters; nothing was done"
        )
        raise InvalidInputError(msg, field="body")


def _declares_body(request: Request[Any, Any, Any]) -> bool:
    """Whether the request's head announces a body: a `Content-Length` other than 0, or `Transfer-Encoding`."""
    length = request.headers.get("content-length", "").strip()
    return (bool(length) and length != "0") or "transfer-encoding" in request.headers


def _says_nothing(body: bytes) -> bool:
    """An empty body, or one that asks for nothing (`{}`, `null`), as generic clients send with every POST."""
    if not body.strip():
        return True
    try:
        return msgspec.json.decode(body) in ({}, None)
    except (msgspec.DecodeError, RecursionError):
        return False


def malformed_json(error: msgspec.DecodeError, body: bytes) -> InvalidInputError:
    """The 400 of a body that is not JSON, naming `body`.

    msgspec calls a high-surrogate escape (D800-DBFF) with no low one after it "Input data was truncated"
    (at the end of a body) or "unexpected end of hex escape" (within one), which sent a caller looking for
    a cut-off body that was whole; a low one (DC00-DFFF) with no high one before it "invalid utf-16
    surrogate pair". Both are named as what they are.
    """
    reason = str(error).removeprefix(_MSGSPEC_PREFIX)  # "malformed JSON: JSON is malformed: ..." said it twice
    misnamed = reason == "Input data was truncated" or "escape" in reason or "surrogate" in reason
    if misnamed and _LONE_HIGH_SURROGATE.search(body):
        reason = "a \\uD800-\\uDBFF escape not followed by a \\uDC00-\\uDFFF one (a lone surrogate is no character)"
    elif misnamed and _LONE_LOW_SURROGATE.search(body):
        reason = "a \\uDC00-\\uDFFF escape not after a \\uD800-\\uDBFF one (a lone surrogate is no character)"
    return InvalidInputError(f"malformed JSON: {reason}", field="body")
