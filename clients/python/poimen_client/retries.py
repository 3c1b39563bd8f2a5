"""When to send a request again: 429/502/503/504 answers and refused connections, backing off or after `Retry-After`.

Pure decisions, no sleeping: the sync and the async client each sleep their own way on the delay
`RetryPolicy.delay_s()` returns.
"""

from __future__ import annotations

import random
import ssl
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING

from poimen_client.errors import refused_status

if TYPE_CHECKING:
    import httpx


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """Retry 429/502/503/504 answers and refused connections up to `max_attempts` sends in all, writes as well as reads.

    No other failure to send is retried: after a timeout, or a connection dropped mid-request, the service may
    have done the work (`TransportError`; read before writing again).

    Not a 429 that is a refused token (its body's `refused_status`): that is raised at once as the
    `UnauthorizedError` or `ForbiddenError` it stands for.

    The wait before retry n (1-based) is the answer's `Retry-After` when it has one, else
    `base_delay_s * 2 ** (n - 1)` capped at `max_delay_s`, scaled by a random factor in [0.5, 1] so
    that many clients shed by one overload do not come back in step. A `Retry-After` longer than
    `max_delay_s` is not waited for: the error is raised at once with its `retry_after_s`, so the caller
    decides. `RetryPolicy(max_attempts=1)` never retries.

    A 502 or 504 may come after the service did the work (a proxy lost the answer, or gave up waiting for it).
    Writes are retried all the same because every write of the API names what it writes, so a second send
    cannot write twice: no endpoint assigns an id. An ingest of the content already stored answers `unchanged`
    at the same version; one with `expected_version` or `if_match` a `ConflictError` (read the document to see
    whether it holds what was sent); a `delete_document` a `NotFoundError`; `delete_documents` and
    `delete_project` count only what the retry deleted; `reindex` queues the project again. A write of another
    writer landing between the two sends is overwritten by the retry unless the write carries its expected
    version.
    """

    max_attempts: int = 4
    base_delay_s: float = 0.5
    max_delay_s: float = 30.0
    # 504: the service's own says an engine did not answer in time, with a Retry-After; it may on a later try.
    # 502: the service never answers it; an ingress does while the pod behind it restarts, as transient as a 503.
    retry_statuses: frozenset[int] = frozenset({429, 502, 503, 504})

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            msg = f"max_attempts must be at least 1, got {self.max_attempts}"
            raise ValueError(msg)
        if self.base_delay_s < 0 or self.max_delay_s < 0:
            msg = "delays must not be negative"
            raise ValueError(msg)

    def delay_s(self, response: httpx.Response, *, attempt: int) -> float | None:
        """Seconds to wait before sending again after `response` to send number `attempt`; None: do not.

        A 429 for a refused token (`refused_status`) is never sent again: the same token is refused again.
        """
        if response.status_code not in self.retry_statuses or attempt >= self.max_attempts:
            return None
        if refused_status(response) is not None:
            return None
        retry_after_s = retry_after_seconds(response)
        if retry_after_s is not None:
            return retry_after_s if retry_after_s <= self.max_delay_s else None
        return self.backoff_s(attempt=attempt)

    def connect_delay_s(self, *, attempt: int) -> float | None:
        """Seconds to wait before sending again after send number `attempt` found no one to connect to; None: do not.

        A refused connection (or a name that does not resolve) reached no service, so any call is safe to send
        again. A connect timeout is not retried: each try would wait `timeout_s` again; nor a failed TLS
        handshake (`failed_in_tls`).
        """
        return self.backoff_s(attempt=attempt) if attempt < self.max_attempts else None

    def backoff_s(self, *, attempt: int) -> float:
        """`base_delay_s * 2 ** (attempt - 1)`, capped at `max_delay_s`, scaled by a random factor in [0.5, 1]."""
        backoff_s = min(self.max_delay_s, self.base_delay_s * 2.0 ** (attempt - 1))
        return backoff_s * random.uniform(0.5, 1.0)  # noqa: S311 - jitter, not cryptography


def failed_in_tls(error: BaseException) -> bool:
    """Whether a failure to connect came from the TLS handshake (a certificate, a protocol): no retry mends it.

    httpx raises those as `ConnectError`, as it does a refused connection; the `ssl` error is in its chain.
    """
    seen: set[int] = set()
    cause: BaseException | None = error
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, ssl.SSLError):
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False


def retry_after_seconds(response: httpx.Response) -> float | None:
    """The `Retry-After` header in seconds (delta-seconds or an HTTP date); None if absent or unreadable."""
    value = response.headers.get("retry-after")
    if value is None:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():  # str.isdigit() also passes `²` (a latin-1 byte), which float() refuses
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())
