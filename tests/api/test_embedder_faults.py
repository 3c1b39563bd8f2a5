"""The embedder failing under a running app: raising, or hanging past every deadline.

The real model sits behind `FaultyEmbedder`, a wrapping `Embedder` adapter that injects the fault when
told (fault injection at the port, not a mock of a driver). Everything else is real: PostgreSQL, tantivy,
the app's lifespan and outbox.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import uuid
from typing import TYPE_CHECKING, Any

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from app.domain.errors import EngineUnavailableError
from app.observability.logs import JsonFormatter, TraceContextFilter
from tests.api.conftest import BuiltEngines, api_settings, app_client, build_engines, wait_indexed

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from app.engines.embedder import SentenceTransformerEmbedder

SEARCHES = 4
DOCUMENTS = [
    {"id": "ingress", "title": "Ingress", "text": "The ingress controller drops idle connections after a minute."},
    {"id": "vacuum", "title": "Autovacuum", "text": "Dead tuples pile up when autovacuum falls behind on tables."},
]
HELD_FOREVER_S = 120.0
QUERY = "autovacuum dead tuples"
LATE = [{"id": "late", "title": "Late", "text": "Written while the embedder is down."}]


class FaultyEmbedder:
    """The real embedder until `fault` is set: then `raise` fails every call, `hang` blocks until `release`.

    A query passed to `remember` first is answered with the vector the real model gave it then, so a search
    meant to succeed under a short deadline never races a model call on a loaded machine.
    """

    def __init__(self, inner: SentenceTransformerEmbedder) -> None:
        self._inner = inner
        self.name, self.model_name, self.dimensions = inner.name, inner.model_name, inner.dimensions
        self.fault: str | None = None
        self.release = asyncio.Event()
        self.hung = 0
        self._remembered: dict[str, list[float]] = {}

    async def remember(self, query: str) -> None:
        self._remembered[query] = await self._inner.embed_query(query)

    async def _fail(self) -> None:
        if self.fault == "raise":
            msg = "embedding model crashed"
            raise EngineUnavailableError(msg, engine=self.name)
        if self.fault == "hang":
            self.hung += 1
            await self.release.wait()

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        await self._fail()
        return await self._inner.embed_documents(texts)

    async def embed_query(self, text: str, *, scope: str = "") -> list[float]:
        await self._fail()
        if text in self._remembered:
            return self._remembered[text]
        return await self._inner.embed_query(text, scope=scope)

    async def embed_queries(self, texts: Sequence[str], *, scope: str = "") -> list[list[float]]:
        await self._fail()
        if all(text in self._remembered for text in texts):
            return [self._remembered[text] for text in texts]
        return await self._inner.embed_queries(texts, scope=scope)


async def seed(built: BuiltEngines, data_dir: Path, project: str) -> int:
    """Ingest `DOCUMENTS` through an app with the default deadlines, and wait for the outbox; the ingest status.

    A real model batch on a loaded machine can take longer than a test's short deadlines (two texts took more
    than 0.5 s with the CPUs busy): only the injected fault is meant to run into those.
    """
    async with app_client(built.app(api_settings(data_dir, query_cache_ttl_secs=0))) as client:
        created = await client.post(f"/v1/projects/{project}/documents", json={"documents": DOCUMENTS})
        if created.status_code == 201:
            for document in DOCUMENTS:
                await wait_indexed(client, project, document["id"])
    return created.status_code


class PacedEmbedder:
    """The real embedder behind one worker that spends `seconds_per_char` on each call's text first.

    A slow model at the port: calls wait for each other (the query encoder is one thread) and cost what their
    text holds, so a call of 32 long queries takes 32 times one of them.
    """

    def __init__(self, inner: SentenceTransformerEmbedder, *, seconds_per_char: float) -> None:
        self._inner, self._seconds_per_char = inner, seconds_per_char
        self.name, self.model_name, self.dimensions = inner.name, inner.model_name, inner.dimensions
        self._worker = asyncio.Lock()
        self.calls: list[int] = []

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return await self._inner.embed_documents(texts)

    async def embed_query(self, text: str, *, scope: str = "") -> list[float]:
        return (await self.embed_queries([text], scope=scope))[0]

    async def embed_queries(self, texts: Sequence[str], *, scope: str = "") -> list[list[float]]:
        async with self._worker:
            self.calls.append(len(texts))
            await asyncio.sleep(self._seconds_per_char * sum(len(text) for text in texts))
            return await self._inner.embed_queries(texts, scope=scope)


BATCH_QUERIES = 32  # SEARCH_BATCH_MAX_QUERIES' default
QUERY_MAX_CHARS = 8000  # QUERY_MAX_CHARS' default


def longest_query(number: int) -> str:
    words = f"autovacuum dead tuples pile up on table {number} when vacuum falls behind; "
    return (words * (QUERY_MAX_CHARS // len(words) + 1))[:QUERY_MAX_CHARS]


async def test_a_full_batch_of_the_longest_queries_is_answered_in_full_by_a_slow_embedder(
    api_postgres_url: str, embedder: SentenceTransformerEmbedder, tmp_path: Path
) -> None:
    # One longest query costs a twentieth of the semantic deadline, the batch 1.6 times it. Held to one query's
    # deadline, the batch embedding timed out, and then so did every search left waiting on the one worker.
    paced = PacedEmbedder(embedder, seconds_per_char=0.1 / QUERY_MAX_CHARS)
    project = f"emb-{uuid.uuid4().hex[:8]}"
    queries = [{"query": longest_query(number), "strategy": "semantic"} for number in range(BATCH_QUERIES)]
    async with build_engines(database_url=api_postgres_url, lexical_path=tmp_path / "lexical", embedder=paced) as built:
        settings = api_settings(tmp_path, query_cache_ttl_secs=0, semantic_timeout_ms=2000)
        async with app_client(built.app(settings)) as client:
            created = await client.post(f"/v1/projects/{project}/documents", json={"documents": DOCUMENTS})
            for document in DOCUMENTS:
                await wait_indexed(client, project, document["id"])
            paced.calls.clear()

            answer = await client.post("/v1/search/batch", json={"project": project, "queries": queries})

    assert created.status_code == 201
    assert answer.status_code == 200, answer.text
    bodies: list[dict[str, Any]] = answer.json()["results"]
    assert [body["degraded_reasons"] for body in bodies] == [[]] * BATCH_QUERIES
    assert [body["results"][0]["document_id"] for body in bodies] == ["vacuum"] * BATCH_QUERIES
    assert sum(paced.calls) == BATCH_QUERIES  # each embedded once, by the batch: no search embedded on its own


@pytest.mark.parametrize("case", [("raise", "unavailable", 503), ("hang", "timeout", 504)], ids=["raise", "hang"])
async def test_a_failing_embedder_degrades_searches_to_the_lexical_leg_and_refuses_ingest_whole(
    case: tuple[str, str, int], api_postgres_url: str, embedder: SentenceTransformerEmbedder, tmp_path: Path
) -> None:
    fault, reason, ingest_status = case
    faulty = FaultyEmbedder(embedder)
    await faulty.remember(QUERY)  # the recovered search's vector, from the real model before any deadline
    project = f"emb-{uuid.uuid4().hex[:8]}"
    async with build_engines(
        database_url=api_postgres_url, lexical_path=tmp_path / "lexical", embedder=faulty
    ) as built:
        created = await seed(built, tmp_path, project)
        # Short deadlines: the hang must run into them, and nothing else here waits for the model.
        settings = api_settings(tmp_path, query_cache_ttl_secs=0, semantic_timeout_ms=300, ingest_embed_timeout_s=0.5)
        async with app_client(built.app(settings)) as client:
            faulty.fault = fault

            searches = [
                client.post("/v1/search", json={"query": QUERY, "project": project, "strategy": s})
                for s in ("hybrid", "hybrid", "semantic", "hybrid")[:SEARCHES]
            ]
            answers = await asyncio.gather(*searches)
            ingest = await client.post(f"/v1/projects/{project}/documents", json={"documents": LATE})
            released_after_answers = not faulty.release.is_set()  # every answer came while the hang still held
            faulty.release.set()
            late = await client.get(f"/v1/projects/{project}/documents/late")
            faulty.fault = None
            recovered = await client.post("/v1/search", json={"query": QUERY, "project": project, "strategy": "hybrid"})

    bodies: list[dict[str, Any]] = [answer.json() for answer in answers]
    assert created == 201
    assert [answer.status_code for answer in answers] == [200] * SEARCHES, [a.text for a in answers]
    assert all(body["degraded"] for body in bodies)
    assert [body["degraded_reasons"] for body in bodies] == [[f"embedder_{reason}"]] * SEARCHES
    assert [body["results"][0]["document_id"] for body in bodies] == ["vacuum"] * SEARCHES  # the lexical leg
    assert all(hit["semantic_score"] is None for body in bodies for hit in body["results"])
    assert released_after_answers
    assert ingest.status_code == ingest_status, ingest.text
    assert ingest.headers["content-type"].startswith("application/problem+json")
    assert ingest.headers["Retry-After"] == "1"
    assert late.status_code == 404  # the refused ingest wrote nothing
    assert recovered.status_code == 200
    assert recovered.json()["degraded"] is False
    if fault == "hang":
        assert faulty.hung == SEARCHES + 1  # every search and the ingest reached the hung model


async def test_a_hung_embedder_degrades_every_query_of_a_batch_search_before_the_hang_is_released(
    api_postgres_url: str, embedder: SentenceTransformerEmbedder, tmp_path: Path
) -> None:
    faulty = FaultyEmbedder(embedder)
    project = f"emb-{uuid.uuid4().hex[:8]}"
    queries = [
        {"query": "autovacuum dead tuples", "strategy": "hybrid"},
        {"query": "ingress idle connections", "strategy": "semantic"},
        {"query": "autovacuum tables", "strategy": "hybrid"},
    ]
    async with build_engines(
        database_url=api_postgres_url, lexical_path=tmp_path / "lexical", embedder=faulty
    ) as built:
        settings = api_settings(tmp_path, query_cache_ttl_secs=0, semantic_timeout_ms=300)
        async with app_client(built.app(settings)) as client:
            created = await client.post(f"/v1/projects/{project}/documents", json={"documents": DOCUMENTS})
            for document in DOCUMENTS:
                await wait_indexed(client, project, document["id"])
            faulty.fault = "hang"

            # The bound only turns "held forever" into a failure; the assertions count, they do not time.
            answer = await asyncio.wait_for(
                client.post("/v1/search/batch", json={"project": project, "queries": queries}), HELD_FOREVER_S
            )
            released_after_answer = not faulty.release.is_set()
            faulty.release.set()

    bodies: list[dict[str, Any]] = answer.json()["results"]
    assert created.status_code == 201
    assert answer.status_code == 200, answer.text
    assert released_after_answer  # the answer came while the hang still held
    assert [body["degraded_reasons"] for body in bodies] == [["embedder_timeout"]] * len(queries)
    assert [body["results"][0]["document_id"] for body in bodies] == ["vacuum", "ingress", "vacuum"]  # lexical leg
    assert all(hit["semantic_score"] is None for body in bodies for hit in body["results"])
    assert faulty.hung == 1 + len(queries)  # the batch embedding, then each search on its own


async def test_a_request_failed_by_an_engine_is_logged_once_per_burst_with_its_request_id(
    api_postgres_url: str, embedder: SentenceTransformerEmbedder, tmp_path: Path
) -> None:
    faulty = FaultyEmbedder(embedder)
    project = f"emb-{uuid.uuid4().hex[:8]}"
    exporter = InMemorySpanExporter()
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(TraceContextFilter())
    handler.setFormatter(JsonFormatter())
    api_logger = logging.getLogger("poimen.api")
    api_logger.addHandler(handler)
    try:
        async with build_engines(
            database_url=api_postgres_url, lexical_path=tmp_path / "lexical", embedder=faulty
        ) as built:
            app = built.app(api_settings(tmp_path), span_processors=[SimpleSpanProcessor(exporter)])
            async with app_client(app) as client:
                faulty.fault = "raise"
                refused = [
                    await client.post(
                        f"/v1/projects/{project}/documents", json=LATE[0], headers={"x-request-id": f"write-{n}"}
                    )
                    for n in range(3)
                ]
    finally:
        api_logger.removeHandler(handler)

    assert [response.status_code for response in refused] == [503] * 3
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    failures = [line for line in lines if "answered 503" in line["message"]]
    assert len(failures) == 1  # the same failure three times in a row: one line (throttled), not three
    assert failures[0]["level"] == "WARNING"
    assert failures[0]["message"].startswith(f"POST /v1/projects/{project}/documents answered 503 Engine unavailable: ")
    assert "embedding model crashed" in failures[0]["message"]
    assert failures[0]["request_id"] == "write-0"
    servers = [span for span in exporter.get_finished_spans() if span.kind == SpanKind.SERVER]
    assert [span.status.status_code for span in servers] == [StatusCode.ERROR] * 3
    assert failures[0]["trace_id"] == format(servers[0].context.trace_id, "032x")
