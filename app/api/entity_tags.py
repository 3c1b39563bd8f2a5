"""Document versions over HTTP: the `ETag` of a document, and the `If-Match` / `If-None-Match` a write or read sends."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from litestar.datastructures import ResponseHeader
from litestar.params import HeaderParameter

from app.domain.errors import InvalidInputError, VersionConflictError
from app.ingestion.expected_versions import ANY_VERSION

if TYPE_CHECKING:
    from app.api.document_schemas import DocumentIn

MAX_VERSION_DIGITS = 18
"""A document version is a PostgreSQL bigint: a longer number names no version (and `int()` caps digits)."""
PENDING_SUFFIX = "-pending"
"""Ends the entity tag of a document the lexical index has not taken yet (`lexically_indexed: false`)."""
IF_MATCH_PATTERN = rf'^\s*(\*|(W/)?"?[0-9]{{1,{MAX_VERSION_DIGITS}}}({PENDING_SUFFIX})?"?)\s*$'
IfMatchHeader = Annotated[
    str | None,
    HeaderParameter(
        name="If-Match",
        description=(
            'Write or delete only if the document is at this version (`7`, `"7"`, `W/"7"`, or its ETag `"7-pending"`),'
            " or exists (`*`)"
        ),
        schema_extra={"pattern": IF_MATCH_PATTERN},
    ),
]

ReadIfMatchHeader = Annotated[
    str | None,
    HeaderParameter(
        name="If-Match",
        description=(
            'Read only if the document is at this version (`7`, `"7"`, `W/"7"`, or its ETag `"7-pending"`), or'
            " exists (`*`): 409 with `current_version` otherwise"
        ),
        schema_extra={"pattern": IF_MATCH_PATTERN},
    ),
]

IfNoneMatchHeader = Annotated[
    str | None,
    HeaderParameter(
        name="If-None-Match",
        description="`*`: write only if the document does not exist yet (as `expected_version` 0)",
        schema_extra={"pattern": r"^\s*\*\s*$"},
    ),
]

ReadIfNoneMatchHeader = Annotated[
    str | None,
    HeaderParameter(
        name="If-None-Match",
        description='ETags the caller holds (`"7"`, `"7-pending", W/"8"`) or `*`: 304 if the stored one is named',
    ),
]
ETAG_HEADER = ResponseHeader(
    name="ETag",
    description=(
        'The document\'s version as an entity tag (`"7"`; `"7-pending"` until the lexical index has it): send it back'
        " as `If-Match` to update safely"
    ),
    documentation_only=True,
)


def entity_tag(version: int, *, lexically_indexed: bool) -> str:
    """The `ETag` of a document at `version`: the version, quoted, marked `-pending` until it is lexically indexed.

    The representation says `lexically_indexed`, which turns true with no new version: one tag for both let a
    caller holding the pending answer be told 304 once it was indexed, and so never see it indexed.
    `If-Match` takes either tag back as the version.
    """
    return f'"{version}"' if lexically_indexed else f'"{version}{PENDING_SUFFIX}"'


def holds_tag(if_none_match: str, tag: str) -> bool:
    """Whether an `If-None-Match` list names `tag` (weak comparison, as RFC 9110 has it for GET) or is `*`."""
    held = (item.strip() for item in if_none_match.split(","))
    return any(item == "*" or item.removeprefix("W/").strip('"') == tag.strip('"') for item in held)


def version_from(if_match: str) -> int:
    """The document version an `If-Match` header names: `7` or `"7"` (an ETag of the version), or `*`.

    `*` is HTTP's "the document exists, at any version" (`ANY_VERSION`): update or delete only.
    """
    if if_match.strip() == "*":
        return ANY_VERSION
    value = if_match.strip().removeprefix("W/").strip('"').removesuffix(PENDING_SUFFIX)
    # ASCII digits only: `str.isdigit` also accepts "²", which `int()` refuses.
    if not (value.isascii() and value.isdigit()) or len(value) > MAX_VERSION_DIGITS:
        msg = f"If-Match must be a document version (a whole number) or *, got {if_match!r}"
        raise InvalidInputError(msg, field="If-Match")
    return int(value)


def expected_version(document: DocumentIn, *, if_match: str | None, if_none_match: str | None) -> int | None:
    """The version a one-document write expects, from its body and its conditional headers; they must agree.

    `If-None-Match: *` is HTTP's "create only", `expected_version` 0; no other `If-None-Match` names a
    version a write could expect, so it is a 400 rather than a header silently ignored.
    """
    if if_none_match is not None and if_none_match.strip() != "*":
        msg = f"If-None-Match takes only * (write only if the document does not exist), got {if_none_match!r}"
        raise InvalidInputError(msg, field="If-None-Match")
    asked = {
        name: version
        for name, version in (
            ("expected_version", document.expected_version),
            ("If-Match", None if if_match is None else version_from(if_match)),
            ("If-None-Match", None if if_none_match is None else 0),
        )
        if version is not None
    }
    if len(set(asked.values())) > 1:
        msg = f"{' and '.join(asked)} expect different versions of document {document.id!r}"
        raise InvalidInputError(msg, field=next(name for name in asked if name != "expected_version"))
    return next(iter(asked.values()), None)


def check_read_precondition(if_match: str | None, *, document_id: str, version: int) -> None:
    """Raise a 409 (`VersionConflictError`) when a read's `If-Match` names a version other than the stored one.

    Evaluated before `If-None-Match`, as RFC 9110 (13.2.2) orders them. Either tag of a version names it. RFC
    9110 (13.1.1) answers a failed precondition 412; the service's writes answer 409 with `current_version`,
    and a read says the same thing the same way.
    """
    if if_match is None:
        return
    expected = version_from(if_match)
    if expected not in {ANY_VERSION, version}:
        msg = f"document {document_id!r} is at version {version}, not {expected} (If-Match)"
        raise VersionConflictError(msg, document_id=document_id, current_version=version)
