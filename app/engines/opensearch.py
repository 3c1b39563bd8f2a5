"""`LexicalIndex` on an OpenSearch cluster: the adapter (client and index lifecycle in `opensearch_lifecycle`).

Request bodies come from `app.engines.opensearch_bodies`, the mapping from
`app.engines.opensearch_mapping`, and responses and driver errors are read by
`app.engines.opensearch_responses`; this module does the I/O, the versioned writes of a batch through
`app.engines.opensearch_writes`.
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import TYPE_CHECKING, Any, Final

from opensearchpy.exceptions import NotFoundError

from app.auth.forwarding import forwarded_token
from app.domain.chunk_filters import has_source_prefix, in_time_window
from app.domain.errors import EngineUnavailableError
from app.engines.opensearch_bodies import build_search_body, latest_per_document, needs_exact_check
from app.engines.opensearch_generation import ProjectGenerations
from app.engines.opensearch_lifecycle import indexes_behind
from app.engines.opensearch_mapping import alias_indexes_pattern
from app.engines.opensearch_responses import ENGINE_NAME, parse_search_response, translate_errors
from app.engines.opensearch_writes import claim_markers, delete_stale_chunks, index_chunks, overtaken_documents_of
from app.engines.project_pruning import PruneSchedule, emptying_projects

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping, Sequence

    from opensearchpy import AsyncOpenSearch

    from app.domain.models import DocumentChunks, Filters, LexicalQuery, ScoredHit
    from app.engines.project_pruning import HoldsDocuments, ProjectsWithDocuments

IDLE_CHECK_INTERVAL_S: Final = 5.0
"""How often an empty `replace_documents` (the outbox's idle call) checks that the known project indexes are there."""
MAX_RESULT_WINDOW: Final = 10_000
"""The most hits one `_search` returns (OpenSearch's `index.max_result_window` default)."""


logger = logging.getLogger(__name__)


# --- the adapter -----------------------------------------------------------------------------------


class OpenSearchLexicalIndex:
    """`LexicalIndex` on OpenSearch, one index per project under `index` (`app.engines.opensearch_projects`).

    The client is owned by the app lifespan. Each project's chunks and version markers live in the
    project's own one-shard index, so its BM25 statistics are its own; a search goes to the project's
    alias only. With `forward_jwt=True`, each request carries the token in `forwarded_token` (when one
    is set) as its `Authorization` header; without a token the client's own credentials apply.
    Writes refresh before returning, so a chunk the outbox marks indexed is searchable. Writes never
    create an index (`require_alias`): before each one, `ProjectGenerations` checks that each written
    project's alias leads to the index it led to before, creates it on the project's first write,
    and recreates a lost one and calls `refill(project_id)` (queue the project again) when it was lost
    or replaced (`app.engines.opensearch_generation`).

    Given `holds_documents(project_id)` and `projects_with_documents()` (PostgreSQL, the source of truth),
    the index of a project that holds no document is deleted (`app.engines.project_pruning`): once a batch
    deleted its last documents, and on the outbox's idle call every 60 s for any other
    (`prune_emptied_projects`). A deleted project's empty index was kept for ever, a shard each, until the
    cluster's shard limit refused new ones.
    Every replica then reads a missing index of such a project as deleted on purpose, not lost: no
    recreating, no refill, no unready `ping`.
    """

    name = ENGINE_NAME

    def __init__(  # noqa: PLR0913 - each knob is named at the composition root
        self,
        client: AsyncOpenSearch,
        *,
        index: str,
        timeout_s: float = 5.0,
        forward_jwt: bool = False,
        bulk_chunk_size: int = 500,
        replicas: int = 1,
        refill: Callable[[str], Awaitable[object]] | None = None,
        holds_documents: HoldsDocuments | None = None,
        projects_with_documents: ProjectsWithDocuments | None = None,
    ) -> None:
        self._client = client
        self._timeout_s = timeout_s
        self._forward_jwt = forward_jwt
        self._bulk_chunk_size = bulk_chunk_size
        self._last_idle_check_s = float("-inf")
        self._prune_schedule = PruneSchedule()
        self._projects_with_documents = projects_with_documents
        self.generation = ProjectGenerations(
            client, base=index, replicas=replicas, refill=refill, holds_documents=holds_documents
        )
        """The project index generations this adapter writes to (`alias_missing`, `refills`, `of(project)`)."""

    def _request_options(self, *, as_caller: bool = False) -> dict[str, Any]:
        """Per-request options; only a search (`as_caller`) carries the caller's forwarded token.

        Writes, deletes and pings are the service's own work: they keep the client's own identity even
        when a caller's token is in context.
        """
        options: dict[str, Any] = {"request_timeout": self._timeout_s}
        token = forwarded_token.get() if self._forward_jwt and as_caller else None
        if token:
            options["headers"] = {"Authorization": f"Bearer {token}"}
        return options

    async def search(self, query: LexicalQuery, *, top_k: int, filters: Filters) -> list[ScoredHit]:
        """Return at most `top_k` chunks of `filters.project_id` by BM25, best first (see `build_search_body`).

        A project without an index has no chunks (an empty result); one this process saw an index of is
        unavailable until its index is back (`app.engines.opensearch_generation`).
        """
        body = build_search_body(query, top_k=top_k, filters=filters)
        if top_k <= 0 or not body["query"]["bool"]["must"] or filters.chunk_ids == ():
            return []  # nothing searchable (or an empty id set): no hits, no round trip
        if not needs_exact_check(filters):
            return await self._search_body(body, filters.project_id)
        # The index selected a superset (`build_filter_clauses`): keep the hits that pass, asking for more
        # while the ones it held back leave fewer than `top_k` and more may follow.
        while True:
            found = await self._search_body(body, filters.project_id)
            hits = [hit for hit in found if in_time_window(hit.chunk.event_time, filters)]
            hits = [hit for hit in hits if has_source_prefix(hit.chunk.source, filters)]
            if len(hits) >= top_k or len(found) < body["size"] or body["size"] >= MAX_RESULT_WINDOW:
                return hits[:top_k]
            body["size"] = min(body["size"] * 4, MAX_RESULT_WINDOW)

    async def _search_body(self, body: dict[str, Any], project_id: str) -> list[ScoredHit]:
        """The hits of one `_search` of `project_id`'s alias (none where the project has no index)."""
        alias = self.generation.alias(project_id)
        with translate_errors():
            try:
                response = await self._client.search(index=alias, body=body, **self._request_options(as_caller=True))
            except NotFoundError:
                if not self.generation.is_known(project_id):
                    return []
                generation = self.generation.of(project_id)
                if not await generation.holds_documents():  # deleted with its project, maybe by another replica
                    self.generation.forget(project_id)
                    return []
                msg = f"opensearch alias {alias} leads to no index"
                raise EngineUnavailableError(msg, engine=ENGINE_NAME) from None
        return parse_search_response(response)

    async def replace_documents(self, documents: Sequence[DocumentChunks]) -> None:
        """Index every listed chunk, then delete each listed document's chunks that are not listed.

        Indexing first means a document never disappears between the two steps. Both steps are
        idempotent (`_id` is the project-qualified chunk id), so a batch retried after a partial
        failure converges to exactly the listed chunks.

        Version-safe for concurrent writers (`app.engines.opensearch_bodies`): chunks are written
        with external versioning on `outbox_version`, and the delete only matches chunks older than
        it. A chunk refused for a newer version is not an error (the newer content is there); its
        document counts as superseded and its delete also takes back what this call wrote of it.
        Each versioned document's marker (`app.engines.opensearch_markers`) is claimed first, so a
        writer older than the document's newest one writes no chunk (and deletes only chunks at or
        below its version), and read again last, so a writer overtaken meanwhile takes back what it
        wrote.
        """
        # A document listed twice would have its two deletes remove each other's chunks: keep one.
        documents = latest_per_document(documents)
        options = self._request_options()
        if not documents:
            # The outbox's idle call: notice a lost index even when nothing is written (see the class doc).
            now_s = time.monotonic()
            if now_s - self._last_idle_check_s >= IDLE_CHECK_INTERVAL_S:
                self._last_idle_check_s = now_s
                await self.generation.check_known(options)
            if self._prune_schedule.due():
                await self.prune_emptied_projects()
            return
        with translate_errors():
            absent = await self.generation.verify((document.project_id for document in documents), options)
            # A project left without an index holds no document: its deletes have nothing to delete, and
            # chunks written for it are a stale writer's, of documents deleted since. Nothing to write.
            documents = [document for document in documents if document.project_id not in absent]
            if not documents:
                return
            stale = await claim_markers(
                self._client,
                documents,
                index_of=self.generation.alias,
                bulk_chunk_size=self._bulk_chunk_size,
                options=options,
            )
            fresh = [document for document in documents if (document.project_id, document.document_id) not in stale]
            # A stale document writes no chunk and counts as superseded: its delete takes back whatever
            # an earlier, failed attempt at its version left behind after the newer writer's delete.
            superseded = await self._index_chunks(fresh, options) | stale
            await self._delete_stale_chunks(documents, superseded=superseded, options=options)
            await self._take_back_overtaken(fresh, superseded=superseded, options=options)
        if self._projects_with_documents is not None:
            # A project whose last documents this batch deleted (a project deleted whole, say) loses its
            # index now rather than at the next periodic prune.
            for project_id in emptying_projects(documents):
                await self._prune_if_emptied(project_id, options)

    # The chunk write and the stale delete stay methods: they are the steps a concurrent writer can land between,
    # and tests/contract/test_opensearch_versions.py holds a write at either to make that race happen.
    async def _index_chunks(
        self, documents: Sequence[DocumentChunks], options: Mapping[str, Any]
    ) -> frozenset[tuple[str, str]]:
        """Bulk-index the chunks; return the (project_id, document_id)s a newer version refused."""
        return await index_chunks(
            self._client,
            documents,
            index_of=self.generation.alias,
            bulk_chunk_size=self._bulk_chunk_size,
            options=options,
        )

    async def _delete_stale_chunks(
        self,
        documents: Sequence[DocumentChunks],
        *,
        superseded: frozenset[tuple[str, str]],
        options: Mapping[str, Any],
    ) -> None:
        """Delete the chunks each document no longer lists (all of a superseded document's, up to its version)."""
        await delete_stale_chunks(
            self._client, documents, index_of=self.generation.alias, superseded=superseded, options=options
        )

    async def _take_back_overtaken(
        self,
        documents: Sequence[DocumentChunks],
        *,
        superseded: frozenset[tuple[str, str]],
        options: Mapping[str, Any],
    ) -> None:
        """Delete every chunk at or below its version of each document whose marker a newer writer took meanwhile."""
        taken_back, overtaken = await overtaken_documents_of(
            self._client, documents, index_of=self.generation.alias, superseded=superseded, options=options
        )
        if overtaken:
            await self._delete_stale_chunks(taken_back, superseded=overtaken, options=options)

    async def prune_emptied_projects(self) -> list[str]:
        """Delete the index of every project that holds no document in PostgreSQL; the projects pruned, sorted.

        Each is asked again just before its index goes, under its generation's lock, so a project written
        meanwhile keeps it. Should a write still slip in between (its first document committed after that
        question), its index is lost like any other and recreated and refilled by the next check.
        """
        if self._projects_with_documents is None:
            return []
        options = self._request_options()
        listed = await self.generation.discover(options)
        emptied = sorted(set(listed) - set(await self._projects_with_documents()))
        pruned = [project_id for project_id in emptied if await self._prune_if_emptied(project_id, options)]
        if pruned:
            logger.info("opensearch indexes of %d projects holding no document deleted", len(pruned))
        return pruned

    async def _prune_if_emptied(self, project_id: str, options: Mapping[str, Any]) -> bool:
        """Delete the project's index if PostgreSQL holds no document of it (asked under the project's lock)."""
        generation = self.generation.of(project_id)
        async with generation.lock:
            if await generation.holds_documents():
                return False
            await self._delete_project_index(project_id, options)
        self.generation.forget(project_id)
        return True

    async def discover_projects(self) -> int:
        """Learn every project index the cluster holds (at start), so the loss of any is noticed; how many."""
        return len(await self.generation.discover(self._request_options()))

    async def delete_project(self, project_id: str) -> None:
        """Delete the project's index (its chunks and version markers); a project without one is not an error.

        The markers go too, or they would pile up forever: outbox versions come from one sequence, so
        every later write of the project is newer anyway. Its next write creates the index anew.
        """
        await self._delete_project_index(project_id, self._request_options())
        self.generation.forget(project_id)

    async def _delete_project_index(self, project_id: str, options: Mapping[str, Any]) -> None:
        alias = self.generation.alias(project_id)
        with translate_errors():
            indexes = await indexes_behind(self._client, alias, among=alias_indexes_pattern(alias), options=options)
            if not indexes:
                return  # nothing indexed, or another replica deleted it first
            with contextlib.suppress(NotFoundError):  # another replica deleted it first
                await self._client.indices.delete(index=",".join(indexes), **options)

    async def ping(self) -> None:
        """Return when the cluster answers and every known project's alias leads to an index.

        A known project's lost index is not ready: its searches cannot answer until the outbox recreated it.
        """
        options = self._request_options()
        with translate_errors():
            alive = await self._client.ping(**options)
            lost = await self.generation.lost(options) if alive else []
        if not alive:
            msg = "opensearch did not answer the ping"
            raise EngineUnavailableError(msg, engine=ENGINE_NAME)
        if lost:
            msg = f"opensearch aliases of {len(lost)} projects lead to no index (first: {lost[0]})"
            raise EngineUnavailableError(msg, engine=ENGINE_NAME)
