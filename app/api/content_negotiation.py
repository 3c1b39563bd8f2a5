"""`Accept` is honoured: a JSON route asked only for types it cannot produce answers 406, never JSON anyway.

The service ignored `Accept`: `Accept: text/html` or `application/xml` on a search got JSON and a 200, which a
client that asked for XML then failed to parse, with no word of why. RFC 9110 (12.5.1) lets a server either
refuse with 406 or disregard the field; the API's routes refuse, naming what they produce. Every API and probe
route produces `application/json`, and `application/problem+json` when it fails: a client that accepts either
is answered (`Accept: application/json, application/problem+json` is how an RFC 9457 client asks).

Matching is RFC 9110's: a type's quality is the one of the most specific range that matches it (`type/sub`,
then `type/*`, then `*/*`), `q=0` refuses it, and parameters other than `q` are not compared (`application/json;
charset=utf-8` is JSON). No `Accept`, or an empty one, accepts anything.

The console's pages, the OpenAPI pages and `/metrics` disregard `Accept` (`NOT_NEGOTIATED_PATH_PREFIXES`):
their clients are browsers and scrapers that read the `Content-Type` they are sent, and a Prometheus set to ask
for OpenMetrics only would lose its scrape to a 406 where the text format it parses as well does no harm.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Final

from litestar.exceptions import HTTPException
from litestar.status_codes import HTTP_406_NOT_ACCEPTABLE

from app.api.errors import PROBLEM_MEDIA_TYPE

if TYPE_CHECKING:
    from collections.abc import Iterable

    from litestar import Request

JSON_MEDIA_TYPE: Final = "application/json"
PRODUCED_MEDIA_TYPES: Final = (JSON_MEDIA_TYPE, PROBLEM_MEDIA_TYPE)
"""What a negotiated route answers: JSON on success, problem+json on failure."""
NOT_NEGOTIATED_PATH_PREFIXES: Final = ("/console", "/schema", "/metrics")
_NAME_CHARS: Final = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
"""An RFC 9110 token (5.6.2): a media type's or subtype's name."""
_MEDIA_RANGE: Final = re.compile(rf"\s*({_NAME_CHARS})/({_NAME_CHARS})\s*")
_QUALITY: Final = re.compile(r"0(?:\.[0-9]{0,3})?|1(?:\.0{0,3})?")
_SHOWN_CHARS: Final = 120


def accepted_ranges(values: Iterable[str]) -> list[tuple[str, str, float]]:
    """The media ranges of `Accept` field values as (type, subtype, quality), lowercase; malformed ones left out.

    A range whose type or `q` is malformed admits nothing: it is no range at all (RFC 9110, 12.4.2, 12.5.1).
    """
    ranges: list[tuple[str, str, float]] = []
    for value in values:
        for element in value.split(","):
            if not element.strip():
                continue  # `a, , b`: empty list elements are allowed and mean nothing (RFC 9110, 5.6.1)
            media_range, *parameters = element.split(";")
            matched = _MEDIA_RANGE.fullmatch(media_range)
            quality: float | None = 1.0
            for parameter in parameters:
                name, _, text = parameter.partition("=")
                if name.strip().lower() == "q":
                    quality = float(text.strip()) if _QUALITY.fullmatch(text.strip()) else None
            if matched is not None and quality is not None:
                ranges.append((matched[1].lower(), matched[2].lower(), quality))
    return ranges


def quality_of(media_type: str, ranges: Iterable[tuple[str, str, float]]) -> float:
    """The quality `ranges` give `media_type` (`type/subtype`): that of its most specific match; 0 if none matches.

    Of several equally specific matches (`application/json;q=0.5, application/json`) the highest counts.
    """
    main, _, sub = media_type.lower().partition("/")
    best_specificity, best_quality = -1, 0.0
    for range_main, range_sub, quality in ranges:
        if (range_main, range_sub) == (main, sub):
            specificity = 2
        elif (range_main, range_sub) == (main, "*"):
            specificity = 1
        elif (range_main, range_sub) == ("*", "*"):
            specificity = 0
        else:
            continue
        if specificity > best_specificity:
            best_specificity, best_quality = specificity, quality
        elif specificity == best_specificity:
            best_quality = max(best_quality, quality)
    return best_quality


def refuse_unacceptable(request: Request[Any, Any, Any]) -> None:
    """Raise a 406 when the request's `Accept` admits neither JSON nor problem+json on a negotiated route.

    OPTIONS is answered whatever `Accept` says: it has no body, and a CORS preflight sends the page's `Accept`.
    """
    if request.method == "OPTIONS" or request.scope["path"].startswith(NOT_NEGOTIATED_PATH_PREFIXES):
        return
    values = [value for value in request.headers.getall("accept", []) if value.strip()]
    if not values:
        return
    ranges = accepted_ranges(values)
    if any(quality_of(produced, ranges) > 0 for produced in PRODUCED_MEDIA_TYPES):
        return
    sent = ", ".join(values)
    shown = sent if len(sent) <= _SHOWN_CHARS else sent[:_SHOWN_CHARS] + "..."
    msg = (
        f"Accept {shown!r} admits no type this route produces: it answers {JSON_MEDIA_TYPE} (errors as"
        f" {PROBLEM_MEDIA_TYPE}); send Accept: {JSON_MEDIA_TYPE}, or none"
    )
    raise HTTPException(status_code=HTTP_406_NOT_ACCEPTABLE, detail=msg)
