"""What OpenSearch answers, read by pure functions: search hits, bulk and by-query failures, driver errors.

Every failure becomes a domain `EngineError` here, so the adapter has one place that knows
opensearch-py's exceptions and OpenSearch's error shapes. Messages name statuses and error types
only: never headers, tokens or documents.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Final

from opensearchpy.exceptions import ConnectionError as OpenSearchConnectionError
from opensearchpy.exceptions import ConnectionTimeout, TransportError

from app.domain.errors import EngineError, EngineRejectedError, EngineTimeoutError, EngineUnavailableError
from app.domain.models import ScoredHit
from app.engines.chunk_codec import chunk_from_record
from app.engines.opensearch_bodies import TEXT_FIELD

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence

ENGINE_NAME: Final = "opensearch"
_TIMEOUT_STATUSES: Final = frozenset({408, 504})
_REFUSED_STATUSES: Final = frozenset({400, 413, 422})
"""What OpenSearch answers a request it will never take as sent (not auth, conflicts, load or absence)."""
_VERSION_CONFLICT: Final = "version_conflict_engine_exception"


def parse_search_response(response: Mapping[str, Any]) -> list[ScoredHit]:
    """Turn a `_search` response into hits, best first, with BM25 `_score` as the score.

    Raises `EngineTimeoutError` when OpenSearch answered `timed_out: true` (the hits would be partial)
    and `EngineUnavailableError` when any shard failed: a silently incomplete leg is worse than a
    visible fallback.
    """
    if response.get("timed_out"):
        msg = "search timed out on the cluster; results would be partial"
        raise EngineTimeoutError(msg, engine=ENGINE_NAME)
    shards = response.get("_shards", {})
    if shards.get("failed", 0):
        msg = f"search failed on {shards['failed']} of {shards.get('total', '?')} shards: {_first_reason(shards)}"
        raise EngineUnavailableError(msg, engine=ENGINE_NAME)
    return [
        ScoredHit(chunk=chunk_from_record(hit["_source"], text_key=TEXT_FIELD), score=float(hit.get("_score") or 0.0))
        for hit in response["hits"]["hits"]
    ]


def raise_for_bulk_failures(failed_items: Sequence[Mapping[str, Any]], *, attempted: int) -> None:
    """Raise `EngineUnavailableError` when any bulk item failed, so the outbox keeps and retries the batch.

    `failed_items` are bulk response items (`{"index": {"status": ..., "error": {...}}}`) that did not
    succeed. The message counts failures and names the first reason; it never echoes documents.
    """
    if not failed_items:
        return
    statuses = sorted({_item_status(item) for item in failed_items})
    first: object = next(iter(failed_items[0].values()), {})
    error = first.get("error") if isinstance(first, dict) else None
    reason = _describe_error(error)
    msg = f"{len(failed_items)} of {attempted} bulk items failed (status {statuses}): {reason}"
    refused = all(status in _REFUSED_STATUSES for status in statuses)
    raise (EngineRejectedError if refused else EngineUnavailableError)(msg, engine=ENGINE_NAME)


def split_version_conflicts(
    failed_items: Sequence[Mapping[str, Any]],
) -> tuple[list[str], list[Mapping[str, Any]]]:
    """Split failed bulk items into the `_id`s refused for a version conflict and every other failure.

    With external versioning a 409 `version_conflict_engine_exception` means the index already holds
    a newer version of that chunk: the write lost to newer content, which is not an error.
    """
    conflicted: list[str] = []
    others: list[Mapping[str, Any]] = []
    for item in failed_items:
        body: object = next(iter(item.values()), {})
        error = body.get("error") if isinstance(body, dict) else None
        if isinstance(error, dict) and error.get("type") == _VERSION_CONFLICT and isinstance(body, dict):
            conflicted.append(str(body.get("_id", "")))
        else:
            others.append(item)
    return conflicted, others


def raise_for_by_query_failures(response: Mapping[str, Any]) -> None:
    """Raise when a `delete_by_query` response reports failures or a timeout (it answers 200 for both)."""
    if response.get("timed_out"):
        msg = "delete_by_query timed out on the cluster"
        raise EngineTimeoutError(msg, engine=ENGINE_NAME)
    failures = response.get("failures") or []
    if failures:
        first = failures[0]
        reason = _describe_error(first.get("cause", first) if isinstance(first, dict) else None)
        msg = f"delete_by_query had {len(failures)} failures: {reason}"
        raise EngineUnavailableError(msg, engine=ENGINE_NAME)


def _item_status(item: Mapping[str, Any]) -> int:
    body: object = next(iter(item.values()), {})
    return int(body.get("status", 0)) if isinstance(body, dict) else 0


def _describe_error(error: object) -> str:
    if isinstance(error, dict):
        return f"{error.get('type', 'error')}: {error.get('reason', '')}".strip()
    return str(error) if error else "no reason given"


def _first_reason(shards: Mapping[str, Any]) -> str:
    failures = shards.get("failures") or []
    return _describe_error(failures[0].get("reason")) if failures else "no reason given"


MAX_REASON_CHARS: Final = 300


def translate_error(error: Exception) -> EngineError:
    """Map an opensearch-py exception to the domain error tree.

    Timeouts (client side, or 408/504) become `EngineTimeoutError`; connection failures, 429
    rejections, auth failures and every other transport error become `EngineUnavailableError`.
    The message names the status and OpenSearch's error type only: never headers, tokens or bodies.
    """
    if isinstance(error, ConnectionTimeout):
        return EngineTimeoutError("opensearch did not answer within the request timeout", engine=ENGINE_NAME)
    if isinstance(error, OpenSearchConnectionError):
        return EngineUnavailableError(f"opensearch unreachable: {type(error).__name__}", engine=ENGINE_NAME)
    if isinstance(error, TransportError):
        status = error.status_code
        if status in _TIMEOUT_STATUSES:
            return EngineTimeoutError(f"opensearch timed out (status {status})", engine=ENGINE_NAME)
        if status == 429:  # noqa: PLR2004 - HTTP 429, the cluster sheds load; the outbox retries later
            return EngineUnavailableError(
                "opensearch rejected the request: too many requests (429)", engine=ENGINE_NAME
            )
        # `error.error` is the whole body when it names no error type (a `_reindex` of many conflicts: 30 KB).
        reason = str(error.error)[:MAX_REASON_CHARS]
        refused = EngineRejectedError if status in _REFUSED_STATUSES else EngineUnavailableError
        return refused(f"opensearch refused the request (status {status}: {reason})", engine=ENGINE_NAME)
    return EngineUnavailableError(f"opensearch call failed: {type(error).__name__}", engine=ENGINE_NAME)


@contextlib.contextmanager
def translate_errors() -> Iterator[None]:
    """Re-raise opensearch-py and client-side timeout errors as `EngineError`s; domain errors pass."""
    try:
        yield
    except EngineError:
        raise
    except (TransportError, TimeoutError) as error:
        if isinstance(error, TimeoutError):
            msg = "opensearch call timed out"
            raise EngineTimeoutError(msg, engine=ENGINE_NAME) from None
        raise translate_error(error) from None
