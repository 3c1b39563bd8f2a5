"""`LexicalIndex` on an OpenSearch cluster: BM25 query DSL, `async_bulk` writes, error translation.

The index lives under a versioned name (`<alias>-v<SCHEMA_VERSION>`) behind the configured alias, so a
mapping change is a new version, a reindex and an atomic alias swap, never downtime.

Request bodies are built by pure functions (`index_body`, `build_search_body`, `build_bulk_actions`,
`build_stale_chunks_query`) and responses parsed by pure functions (`parse_search_response`,
`raise_for_bulk_failures`, `raise_for_by_query_failures`), so golden tests pin both without a server.

Deviations from the reference mapping (`hybrid-search-design.md` §2.2), each on purpose:
- `source` and `breadcrumb` are `english` text with a `raw` keyword sub-field instead of bare keywords:
  the query's `multi_match` searches them as words, and filters use `source.raw`.
- The `ngram_tokenizer` sits under `analysis.tokenizer` (the reference nests it under `analyzer`,
  which OpenSearch rejects), and field boosts live in the query, not the mapping (mapping boosts are
  deprecated).
- Fields needed to rebuild a `Chunk` (`chunk_id`, `position`, `tags`, `event_time`, `chunk_hash`) are added.
- `tags` has an `english` text sub-field, `tags.text`, searched by the `multi_match` unboosted (half the
  content's weight, like breadcrumb and source), so `#networking` finds chunks tagged `networking`
  whose text never says it. Filters keep the exact keyword `tags`. (Schema version 2; version 1 indices
  are reindexed and the alias swapped by `ensure_index` at start.)
- `context` (schema version 3) holds the chunk's own context (`app.engines.lexical_context`; up to
  version 3 also its neighbours' edges), `english` text, searched by the `multi_match` at a low boost
  (`CONTEXT_BOOST`) and never returned; excluded terms are not looked for there.
- `titled_content` (schema version 4) is the chunk's breadcrumb and text in one `english` field
  (`titled_text`, what tantivy's content field holds and the vector leg embeds). The query searches it
  in place of `content`, `section_title` and `breadcrumb`: as one field a title word counts like a body
  word, where the reference's separate title fields outranked the text (docs/evaluation.md). `content`,
  `breadcrumb` and `section_title` stay mapped: they rebuild the `Chunk` a hit returns.
"""

from __future__ import annotations

import contextlib
import logging
from contextvars import ContextVar
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from opensearchpy import AsyncOpenSearch
from opensearchpy.exceptions import ConnectionError as OpenSearchConnectionError
from opensearchpy.exceptions import ConnectionTimeout, NotFoundError, TransportError
from opensearchpy.helpers import async_bulk

from app.config import ConfigurationError
from app.domain.errors import EngineError, EngineTimeoutError, EngineUnavailableError
from app.domain.models import Chunk, ScoredHit
from app.engines.lexical_context import DEFAULT_CONTEXT_BOOST, lexical_text

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence

    from app.config import Settings
    from app.domain.models import DocumentChunks, Filters, LexicalQuery

ENGINE_NAME: Final = "opensearch"
SCHEMA_VERSION: Final = 4
"""Bump when `index_body()` changes: `ensure_index` then builds `<alias>-v<N>`, reindexes and swaps."""

CONTENT_BOOST: Final = 2.0
CONTEXT_BOOST: Final = DEFAULT_CONTEXT_BOOST
SEARCH_FIELDS: Final = (
    f"titled_content^{CONTENT_BOOST:g}",
    "source",
    "tags.text",
    f"context^{CONTEXT_BOOST:g}",
)
"""As tantivy: the titled content counts twice, source and tags as words once, the context at a low boost."""

_UNBOOSTED_FIELDS: Final = ("titled_content", "source", "tags.text")
SOURCE_FIELDS: Final = (
    "chunk_id",
    "document_id",
    "project_id",
    "content",
    "source",
    "level",
    "breadcrumb",
    "section_title",
    "position",
    "tags",
    "event_time",
    "chunk_hash",
)
"""`_source` fields a hit returns: exactly what rebuilds a `Chunk`."""

FUZZY_MAX_EXPANSIONS: Final = 50
DELETE_CLAUSES_PER_REQUEST: Final = 200
"""Documents per `delete_by_query`; stays well under OpenSearch's default 1024 boolean clauses."""

_TIMEOUT_STATUSES: Final = frozenset({408, 504})

forwarded_token: ContextVar[str | None] = ContextVar("opensearch_forwarded_token", default=None)
"""The caller's bearer token, set by the HTTP layer for one request when `OPENSEARCH_AUTH=forward_jwt`.

It is sent to OpenSearch as `Authorization: Bearer ...` on that request only and never logged.
"""

logger = logging.getLogger(__name__)


# --- client and index lifecycle -------------------------------------------------------------------


def create_opensearch_client(settings: Settings) -> AsyncOpenSearch:
    """Build the async client from settings; the app lifespan owns it and closes it.

    TLS follows the URL scheme (`https://`), with `OPENSEARCH_CA_FILE` and `OPENSEARCH_VERIFY_CERTS`.
    Basic credentials are used for `basic`, and for `forward_jwt` too when configured: background
    writes (the outbox) have no caller token and fall back to them. Timeouts do not retry, so a search
    never outlives its deadline several times over; connection errors and 502/503/504 retry
    `OPENSEARCH_MAX_RETRIES` times.
    """
    if settings.opensearch_url is None:
        msg = "OPENSEARCH_URL is not set"
        raise ConfigurationError(msg)
    if settings.opensearch_auth == "basic" and not (settings.opensearch_username and settings.opensearch_password):
        msg = "OPENSEARCH_AUTH=basic needs OPENSEARCH_USERNAME and OPENSEARCH_PASSWORD"
        raise ConfigurationError(msg)
    options: dict[str, Any] = {
        "hosts": [settings.opensearch_url],
        "timeout": settings.opensearch_timeout_s,
        "max_retries": settings.opensearch_max_retries,
        "retry_on_timeout": False,
        "retry_on_status": (502, 503, 504),
        "http_compress": True,
        "verify_certs": settings.opensearch_verify_certs,
        "ssl_show_warn": settings.opensearch_verify_certs,
    }
    if settings.opensearch_ca_file is not None:
        options["ca_certs"] = str(settings.opensearch_ca_file)
    if settings.opensearch_auth != "none" and settings.opensearch_username and settings.opensearch_password:
        options["http_auth"] = (settings.opensearch_username, settings.opensearch_password.get_secret_value())
    return AsyncOpenSearch(**options)


def versioned_index_name(alias: str, version: int = SCHEMA_VERSION) -> str:
    """The concrete index behind `alias` for a schema version, e.g. `poimen-chunks-v1`."""
    return f"{alias}-v{version}"


def index_body(*, shards: int = 2, replicas: int = 1) -> dict[str, Any]:
    """Settings and mapping of the chunk index (reference §2.2, with the deviations in the module doc)."""
    english_text_with_raw = {
        "type": "text",
        "analyzer": "english",
        "fields": {"raw": {"type": "keyword", "ignore_above": 1024}},
    }
    return {
        "settings": {
            "number_of_shards": shards,
            "number_of_replicas": replicas,
            "index.codec": "best_compression",
            "analysis": {
                "analyzer": {
                    "ngram_analyzer": {"type": "custom", "tokenizer": "ngram_tokenizer", "filter": ["lowercase"]},
                },
                "tokenizer": {
                    "ngram_tokenizer": {
                        "type": "ngram",
                        "min_gram": 3,
                        "max_gram": 4,
                        "token_chars": ["letter", "digit"],
                    },
                },
            },
        },
        "mappings": {
            "dynamic": "strict",
            "_meta": {"schema_version": SCHEMA_VERSION},
            "properties": {
                "chunk_id": {"type": "keyword"},
                "document_id": {"type": "keyword"},
                "project_id": {"type": "keyword"},
                "content": {
                    "type": "text",
                    "analyzer": "english",
                    "fields": {
                        # 8191 chars stay under Lucene's 32766-byte term limit even at 4 UTF-8 bytes each.
                        "raw": {"type": "keyword", "ignore_above": 8191},
                        "ngram": {"type": "text", "analyzer": "ngram_analyzer"},
                    },
                },
                "titled_content": {"type": "text", "analyzer": "english"},
                "section_title": {"type": "text", "analyzer": "english"},
                "breadcrumb": english_text_with_raw,
                "source": english_text_with_raw,
                "tags": {"type": "keyword", "fields": {"text": {"type": "text", "analyzer": "english"}}},
                "context": {"type": "text", "analyzer": "english"},
                "level": {"type": "keyword"},
                "position": {"type": "integer"},
                "chunk_hash": {"type": "keyword", "index": False},
                "event_time": {"type": "date"},
                "indexed_at": {"type": "date"},
            },
        },
    }


async def ensure_index(
    client: AsyncOpenSearch, *, alias: str, shards: int = 2, replicas: int = 1, headers: Mapping[str, str] | None = None
) -> str:
    """Create or verify the current index version behind `alias`; return the concrete index name.

    - No alias yet: create `<alias>-v<SCHEMA_VERSION>` with the alias attached (one atomic request).
    - Alias on the current version: verify its `_meta.schema_version`, change nothing.
    - Alias on an older version: create the new version, copy documents with `_reindex`, then move
      the alias in one `update_aliases` call. The old index is kept for rollback; delete it by hand.
    Raises `EngineUnavailableError` when a concrete index already squats the alias name, or the alias
    points at a newer version than this code knows.
    """
    target = versioned_index_name(alias)
    extra: dict[str, Any] = {"headers": dict(headers)} if headers else {}
    with translate_errors():
        if await client.indices.exists_alias(name=alias, **extra):
            current = sorted((await client.indices.get_alias(name=alias, **extra)).keys())
            if current == [target]:
                await _verify_schema_version(client, target, extra)
                return target
            if len(current) != 1 or _version_of(current[0], alias) > SCHEMA_VERSION:
                msg = f"alias {alias} points at {current}, expected {target} or an older version"
                raise EngineUnavailableError(msg, engine=ENGINE_NAME)
            await _create_index(client, target, index_body(shards=shards, replicas=replicas), alias=None, extra=extra)
            await client.reindex(
                body={"source": {"index": current[0]}, "dest": {"index": target}},
                refresh=True,
                wait_for_completion=True,
                **extra,
            )
            await client.indices.update_aliases(
                body={
                    "actions": [
                        {"remove": {"index": current[0], "alias": alias}},
                        {"add": {"index": target, "alias": alias}},
                    ]
                },
                **extra,
            )
            logger.info("opensearch alias moved", extra={"alias": alias, "from": current[0], "to": target})
            return target
        if await client.indices.exists(index=alias, **extra):
            msg = f"a concrete index named {alias} exists where the alias belongs"
            raise EngineUnavailableError(msg, engine=ENGINE_NAME)
        await _create_index(client, target, index_body(shards=shards, replicas=replicas), alias=alias, extra=extra)
        return target


async def _create_index(
    client: AsyncOpenSearch, name: str, body: dict[str, Any], *, alias: str | None, extra: dict[str, Any]
) -> None:
    if await client.indices.exists(index=name, **extra):
        await _verify_schema_version(client, name, extra)
        if alias is not None:
            await client.indices.put_alias(index=name, name=alias, **extra)
        return
    if alias is not None:
        body = body | {"aliases": {alias: {}}}
    await client.indices.create(index=name, body=body, **extra)


async def _verify_schema_version(client: AsyncOpenSearch, name: str, extra: dict[str, Any]) -> None:
    mapping = await client.indices.get_mapping(index=name, **extra)
    found = mapping.get(name, {}).get("mappings", {}).get("_meta", {}).get("schema_version")
    if found != SCHEMA_VERSION:
        msg = f"index {name} has schema version {found!r}, expected {SCHEMA_VERSION}"
        raise EngineUnavailableError(msg, engine=ENGINE_NAME)


def _version_of(index: str, alias: str) -> int:
    suffix = index.removeprefix(f"{alias}-v")
    return int(suffix) if suffix.isdigit() else 0


# --- pure request builders -------------------------------------------------------------------------


def document_key(project_id: str, chunk_id: str) -> str:
    """The `_id` of a chunk: project-qualified, so equal chunk ids of two projects never collide.

    Project ids cannot contain `:` (`PROJECT_ID_PATTERN`), so the key is unambiguous.
    """
    return f"{project_id}:{chunk_id}"


def build_filter_clauses(filters: Filters) -> list[dict[str, Any]]:
    """The `bool.filter` clauses: project always, then levels, every tag, source prefix, dates, ids."""
    clauses: list[dict[str, Any]] = [{"term": {"project_id": filters.project_id}}]
    if filters.levels:
        clauses.append({"terms": {"level": list(filters.levels)}})
    clauses.extend({"term": {"tags": tag}} for tag in dict.fromkeys(filters.tags))  # all-of: one clause per tag
    if filters.source_prefix:
        clauses.append({"prefix": {"source.raw": filters.source_prefix}})
    date_range: dict[str, str] = {}
    if filters.event_time_from is not None:
        date_range["gte"] = filters.event_time_from.isoformat()
    if filters.event_time_to is not None:
        date_range["lt"] = filters.event_time_to.isoformat()
    if date_range:
        window: dict[str, Any] = {"range": {"event_time": date_range}}
        if filters.include_undated:
            undated = {"bool": {"must_not": [{"exists": {"field": "event_time"}}]}}
            window = {"bool": {"should": [window, undated], "minimum_should_match": 1}}
        clauses.append(window)
    if filters.chunk_ids is not None:
        clauses.append({"terms": {"chunk_id": sorted(filters.chunk_ids)}})
    return clauses


def build_search_body(query: LexicalQuery, *, top_k: int, filters: Filters) -> dict[str, Any]:
    """The `_search` body: BM25 `multi_match` (best_fields), phrases, filters and exclusions.

    Free text is an OR over its words; every phrase must occur in the titled content (`match_phrase`,
    boosted like content); a chunk with an excluded term in any searched field is dropped
    (`must_not`). `multi_match` never parses query syntax, so `:`, `(`, `*` and quotes are plain
    text. Ties on score break on `chunk_id`, ascending.
    """
    must: list[dict[str, Any]] = []
    text = query.text.strip()
    if text:
        text_match: dict[str, Any] = {
            "query": text,
            "fields": list(SEARCH_FIELDS),
            "type": "best_fields",
            "operator": "or",
        }
        if query.fuzzy:
            text_match |= {"fuzziness": "AUTO", "max_expansions": FUZZY_MAX_EXPANSIONS}
        must.append({"multi_match": text_match})
    must.extend(
        {"match_phrase": {"titled_content": {"query": phrase, "boost": CONTENT_BOOST}}}
        for phrase in dict.fromkeys(query.phrases)
        if phrase.strip()
    )
    boolean: dict[str, Any] = {"must": must, "filter": build_filter_clauses(filters)}
    excluded = [term for term in dict.fromkeys(query.excluded_terms) if term.strip()]
    if excluded:
        # `phrase` type: a multi-word exclusion excludes the phrase, not each of its words.
        boolean["must_not"] = [
            {"multi_match": {"query": term, "fields": list(_UNBOOSTED_FIELDS), "type": "phrase"}} for term in excluded
        ]
    return {
        "size": top_k,
        "query": {"bool": boolean},
        "sort": [{"_score": {"order": "desc"}}, {"chunk_id": {"order": "asc"}}],
        "track_total_hits": False,
        "_source": list(SOURCE_FIELDS),
    }


def chunk_document(chunk: Chunk, *, indexed_at: datetime) -> dict[str, Any]:
    """The `_source` stored for a chunk, with its `lexical_text` as `titled_content` and `context`."""
    text = lexical_text(chunk)
    return {
        "chunk_id": chunk.chunk_id,
        "document_id": chunk.document_id,
        "project_id": chunk.project_id,
        "content": chunk.text,
        "titled_content": text.content,
        "source": chunk.source,
        "level": chunk.level,
        "breadcrumb": list(chunk.breadcrumb),
        "section_title": chunk.section_title,
        "position": chunk.position,
        "tags": list(chunk.tags),
        "event_time": None if chunk.event_time is None else chunk.event_time.isoformat(),
        "chunk_hash": chunk.chunk_hash,
        "context": text.context,
        "indexed_at": indexed_at.isoformat(),
    }


def latest_per_document(documents: Sequence[DocumentChunks]) -> list[DocumentChunks]:
    """One entry per (project, document): the last one listed, which is the newest state of it."""
    latest = {(document.project_id, document.document_id): document for document in documents}
    return list(latest.values())


def build_bulk_actions(
    documents: Sequence[DocumentChunks], *, index: str, indexed_at: datetime
) -> list[dict[str, Any]]:
    """`async_bulk` index actions for every chunk of every document, in order; deletes are separate."""
    actions: list[dict[str, Any]] = []
    for document in documents:
        actions.extend(
            {
                "_op_type": "index",
                "_index": index,
                "_id": document_key(chunk.project_id, chunk.chunk_id),
                "_source": chunk_document(chunk, indexed_at=indexed_at),
            }
            for chunk in document.chunks
        )
    return actions


def build_stale_chunks_query(documents: Sequence[DocumentChunks]) -> dict[str, Any]:
    """A `delete_by_query` body matching every indexed chunk of these documents that is not listed now.

    A document with no chunks matches all of its chunks, which deletes it.
    """
    per_document: list[dict[str, Any]] = []
    for document in documents:
        clause: dict[str, Any] = {
            "filter": [
                {"term": {"project_id": document.project_id}},
                {"term": {"document_id": document.document_id}},
            ]
        }
        if document.chunks:
            clause["must_not"] = [{"terms": {"chunk_id": sorted({chunk.chunk_id for chunk in document.chunks})}}]
        per_document.append({"bool": clause})
    return {"query": {"bool": {"should": per_document, "minimum_should_match": 1}}}


def build_project_query(project_id: str) -> dict[str, Any]:
    """A `delete_by_query` body matching every chunk of one project."""
    return {"query": {"bool": {"filter": [{"term": {"project_id": project_id}}]}}}


# --- pure response parsers -------------------------------------------------------------------------


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
        ScoredHit(chunk=_chunk_from_source(hit["_source"]), score=float(hit.get("_score") or 0.0))
        for hit in response["hits"]["hits"]
    ]


def _chunk_from_source(source: Mapping[str, Any]) -> Chunk:
    event_time = source.get("event_time")
    return Chunk(
        chunk_id=source["chunk_id"],
        document_id=source["document_id"],
        project_id=source["project_id"],
        text=source["content"],
        source=source["source"],
        level=source["level"],
        breadcrumb=tuple(source.get("breadcrumb") or ()),
        section_title=source.get("section_title") or "",
        position=int(source.get("position") or 0),
        tags=tuple(source.get("tags") or ()),
        event_time=None if event_time is None else datetime.fromisoformat(event_time),
        chunk_hash=source.get("chunk_hash") or "",
    )


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
    raise EngineUnavailableError(msg, engine=ENGINE_NAME)


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


# --- error translation -----------------------------------------------------------------------------


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
        return EngineUnavailableError(
            f"opensearch refused the request (status {status}: {error.error})", engine=ENGINE_NAME
        )
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


# --- the adapter -----------------------------------------------------------------------------------


class OpenSearchLexicalIndex:
    """`LexicalIndex` over one OpenSearch alias. The client is owned by the app lifespan.

    With `forward_jwt=True`, each request carries the token in `forwarded_token` (when one is set)
    as its `Authorization` header; without a token the client's own credentials apply.
    Writes refresh the index before returning, so a chunk the outbox marks indexed is searchable.
    """

    name = ENGINE_NAME

    def __init__(
        self,
        client: AsyncOpenSearch,
        *,
        index: str,
        timeout_s: float = 5.0,
        forward_jwt: bool = False,
        bulk_chunk_size: int = 500,
    ) -> None:
        self._client = client
        self._index = index
        self._timeout_s = timeout_s
        self._forward_jwt = forward_jwt
        self._bulk_chunk_size = bulk_chunk_size

    def _request_options(self) -> dict[str, Any]:
        options: dict[str, Any] = {"request_timeout": self._timeout_s}
        token = forwarded_token.get() if self._forward_jwt else None
        if token:
            options["headers"] = {"Authorization": f"Bearer {token}"}
        return options

    async def search(self, query: LexicalQuery, *, top_k: int, filters: Filters) -> list[ScoredHit]:
        """Return at most `top_k` chunks of `filters.project_id` by BM25, best first (see `build_search_body`)."""
        body = build_search_body(query, top_k=top_k, filters=filters)
        if top_k <= 0 or not body["query"]["bool"]["must"] or filters.chunk_ids == ():
            return []  # nothing searchable (or an empty id set): no hits, no round trip
        with translate_errors():
            response = await self._client.search(index=self._index, body=body, **self._request_options())
        return parse_search_response(response)

    async def replace_documents(self, documents: Sequence[DocumentChunks]) -> None:
        """Index every listed chunk, then delete each listed document's chunks that are not listed.

        Indexing first means a document never disappears between the two steps. Both steps are
        idempotent (`_id` is the project-qualified chunk id), so a batch retried after a partial
        failure converges to exactly the listed chunks.
        """
        # A document listed twice would have its two deletes remove each other's chunks: keep the last.
        documents = latest_per_document(documents)
        if not documents:
            return
        actions = build_bulk_actions(documents, index=self._index, indexed_at=datetime.now().astimezone())
        options = self._request_options()
        with translate_errors():
            if actions:
                _, failed = await async_bulk(
                    self._client,
                    actions,
                    chunk_size=self._bulk_chunk_size,
                    raise_on_error=False,
                    refresh=True,
                    **options,
                )
                raise_for_bulk_failures(failed if isinstance(failed, list) else [], attempted=len(actions))
            for start in range(0, len(documents), DELETE_CLAUSES_PER_REQUEST):
                batch = documents[start : start + DELETE_CLAUSES_PER_REQUEST]
                response = await self._client.delete_by_query(
                    index=self._index,
                    body=build_stale_chunks_query(batch),
                    conflicts="proceed",
                    refresh=True,
                    **options,
                )
                raise_for_by_query_failures(response)

    async def delete_project(self, project_id: str) -> None:
        """Delete every chunk of the project; a project with nothing indexed is not an error."""
        with translate_errors():
            try:
                response = await self._client.delete_by_query(
                    index=self._index,
                    body=build_project_query(project_id),
                    conflicts="proceed",
                    refresh=True,
                    **self._request_options(),
                )
            except NotFoundError:
                return
            raise_for_by_query_failures(response)

    async def ping(self) -> None:
        """Return when the cluster answers; raise `EngineUnavailableError` otherwise."""
        with translate_errors():
            alive = await self._client.ping(**self._request_options())
        if not alive:
            msg = "opensearch did not answer the ping"
            raise EngineUnavailableError(msg, engine=ENGINE_NAME)
