"""A request body is read as sent, UTF-8 JSON: a content coding or another charset is a 415, never ignored.

The service decodes no content coding, and read a body whatever its `Content-Encoding` said: a gzip body
was a 400 "malformed JSON: invalid character (byte 0)", and one labelled `br` or `x-foo` but sent plain
was written as if the label were not there. RFC 9110 (8.4, 15.5.16) has a server refuse a coding it does
not take with 415 and name the ones it does in `Accept-Encoding`; JSON is UTF-8 (RFC 8259, 8.1), so a
body labelled `charset=utf-16` or `iso-8859-1` is a 415 too rather than a "malformed JSON" 400. The
`Content-Type` itself is not checked: `curl -d` labels JSON `application/x-www-form-urlencoded`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from litestar.exceptions import HTTPException
from litestar.status_codes import HTTP_415_UNSUPPORTED_MEDIA_TYPE

from app.api.strict_bodies import READS_BODY_OPT_KEY

if TYPE_CHECKING:
    from litestar import Request

IDENTITY: Final = "identity"
UTF8_CHARSETS: Final = frozenset({"utf-8", "utf8", "us-ascii"})
"""Charsets a JSON body may be labelled with: UTF-8, and ASCII, which is UTF-8."""


def refuse_coded_body(request: Request[Any, Any, Any]) -> None:
    """Raise a 415 when a route that reads its body is sent one in a content coding, or labelled another charset.

    A route that takes no body refuses any body it is sent (`reject_unread_body`), coded or not.
    """
    handler = request.route_handler
    if handler.parsed_data_field is None and not handler.opt.get(READS_BODY_OPT_KEY):
        return
    codings = [
        coding.strip().lower()
        for value in request.headers.getall("content-encoding", [])
        for coding in value.split(",")
        if coding.strip()
    ]
    coded = [coding for coding in codings if coding != IDENTITY]
    if coded:
        msg = (
            f"the request body is sent with Content-Encoding {', '.join(coded)}: this service reads bodies as sent"
            " (identity); send it uncompressed"
        )
        raise HTTPException(
            status_code=HTTP_415_UNSUPPORTED_MEDIA_TYPE, detail=msg, headers={"Accept-Encoding": IDENTITY}
        )
    charset = _charset(request.headers.get("content-type", ""))
    if charset is not None and charset not in UTF8_CHARSETS:
        msg = f"the request body is labelled charset={charset}: JSON bodies are UTF-8 (RFC 8259); send it in UTF-8"
        raise HTTPException(status_code=HTTP_415_UNSUPPORTED_MEDIA_TYPE, detail=msg)


def _charset(content_type: str) -> str | None:
    """The `charset` parameter of a `Content-Type` value, lowercase and unquoted; None when it has none."""
    for parameter in content_type.split(";")[1:]:
        name, _, value = parameter.partition("=")
        if name.strip().lower() == "charset":
            return value.strip().strip('"').lower()
    return None
