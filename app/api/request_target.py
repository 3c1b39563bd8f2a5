"""A request target whose percent-escapes are not UTF-8 is a 400, never read with U+FFFD in place of its bytes.

uvicorn decodes the path with `urllib.parse.unquote` (invalid UTF-8 becomes U+FFFD) and Litestar decodes the
query string alike, so `DELETE .../documents/x%FF` deleted the document `x\ufffd`, as did `x%C3` and
`x%EF%BF%BD`, and `?query=%FF` searched for U+FFFD: three URLs naming no text at all addressed a document
they never named, or asked for what was not sent. The raw target is checked before any handler runs; only
one holding a `%` or a byte past ASCII is decoded again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final
from urllib.parse import unquote_to_bytes

from app.domain.errors import InvalidInputError

if TYPE_CHECKING:
    from litestar import Request

NOT_UTF8: Final = "percent-escapes that are not UTF-8 (RFC 3986 percent-encodes a character's UTF-8 bytes)"


def reject_undecodable_target(request: Request[Any, Any, Any]) -> None:
    """A 400 when the path, or a query parameter's name or value, percent-decodes to bytes that are not UTF-8.

    The field is `path`, or the query parameter's name (as far as it decodes).
    """
    raw_path = request.scope.get("raw_path") or b""
    path = raw_path.split(b"?", 1)[0]  # a test client's raw path carries the query string too
    if not _decodes(path):
        msg = f"the request path holds {NOT_UTF8}"
        raise InvalidInputError(msg, field="path")
    query: bytes = request.scope.get("query_string") or b""
    if _decodes(query.replace(b"+", b" ")):
        return
    for pair in query.split(b"&"):
        name, _, value = pair.replace(b"+", b" ").partition(b"=")
        if not (_decodes(name) and _decodes(value)):
            field = unquote_to_bytes(name).decode("utf-8", errors="replace")
            msg = f"query parameter {field!r} holds {NOT_UTF8}"
            raise InvalidInputError(msg, field=field)


def _decodes(raw: bytes) -> bool:
    """Whether `raw` percent-decodes to UTF-8 (bytes without a `%` or a byte past ASCII are ASCII: they do)."""
    if b"%" not in raw and raw.isascii():
        return True
    try:
        unquote_to_bytes(raw).decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
