"""Requests the HTTP protocol refuses before the app sees them: `poimen_http_requests_refused_total{status,reason}`.

A request head over the cap (414, 431), one that did not arrive in time (408) or one the parser could not read
(400) is answered inside the connection handler (`app.api.request_head`), before Litestar: its middleware, and so
`poimen_http_requests_total`, never see it. One counter with one series per reason (four in all) counts them,
so an SRE can see and alert on clients sending what the server refuses.
"""

from __future__ import annotations

from typing import Final

from prometheus_client import Counter

from app.observability.metrics import MetricsSwitch

MALFORMED: Final = "malformed"
HEAD_TIMEOUT: Final = "head_timeout"
TARGET_TOO_LONG: Final = "target_too_long"
HEAD_TOO_LARGE: Final = "head_too_large"
REFUSAL_STATUSES: Final = {MALFORMED: 400, HEAD_TIMEOUT: 408, TARGET_TOO_LONG: 414, HEAD_TOO_LARGE: 431}
"""Each reason and the status it is answered with: the label values, a fixed set."""

HTTP_REQUESTS_REFUSED_TOTAL: Final = Counter(
    "poimen_http_requests_refused_total",
    "Requests answered by the HTTP protocol before the app (in no poimen_http_requests_total): malformed (400),"
    " head_timeout (408), target_too_long (414) or head_too_large (431).",
    ["status", "reason"],
)
for _reason, _status in REFUSAL_STATUSES.items():  # each series from 0: rate() and the alerts see it before a refusal
    HTTP_REQUESTS_REFUSED_TOTAL.labels(status=str(_status), reason=_reason)


def record_request_refused(reason: str) -> None:
    """Count one request refused for `reason` (one of `REFUSAL_STATUSES`), under the status it was answered."""
    if MetricsSwitch.enabled:
        HTTP_REQUESTS_REFUSED_TOTAL.labels(status=str(REFUSAL_STATUSES[reason]), reason=reason).inc()
