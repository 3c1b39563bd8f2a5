"""Searches take a share of the process's search memory (`app/api/search_admission.py`) and wait for room.

The app is real (`create_app`, its lifespan, guards, service); the engines are the in-memory adapters and
the query embedder is held at a gate, so a search stays in flight until the test lets it go. Requests go
through httpx's ASGI transport on the test's own loop (Litestar's test client runs each request to its end
in another thread's loop), so several are in flight at once and cancelling one cancels its handler.
"""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import httpx

from app.api.app import create_app
from app.api.search_admission import SEARCH_BYTES_PER_HIT, SEARCH_BYTES_PER_QUERY_CHAR, SEARCHES_IN_FLIGHT
from app.engines.memory import InMemoryDocumentStore
from app.engines.memory_lexical import InMemoryLexicalIndex
from app.engines.memory_vectors import InMemoryVectorIndex
from app.ingestion.admission import Allowance
from app.wiring.engines import Engines
from tests.api.conftest import api_settings
from tests.api.test_overload import SlowEmbedder

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Sequence
    from pathlib import Path

    from litestar import Litestar

PROJECT = "admitted"
LONG_QUERY = "memory bound for concurrent searches " * 100  # 3,700 characters
BATCH = {
    "project": PROJECT,
    "queries": [{"query": LONG_QUERY, "limit": 100, "strategy": "semantic", "explain": True}] * 2,
}
BATCH_CHARGE = 2 * (len(LONG_QUERY) * SEARCH_BYTES_PER_QUERY_CHAR + 100 * SEARCH_BYTES_PER_HIT)
SHORT = {"project": PROJECT, "query": "bound", "limit": 1, "strategy": "lexical"}
SHORT_CHARGE = len("bound") * SEARCH_BYTES_PER_QUERY_CHAR + SEARCH_BYTES_PER_HIT
POLLS = 2000


class GatedEmbedder(SlowEmbedder):
    """`SlowEmbedder`'s 8-d vectors; a query-embedding call is counted, then waits until `gate` is open."""

    name = "gated"
    model_name = "gated-model"
    dimensions = 8

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.calls = 0

    async def embed_query(self, text: str, *, scope: str = "") -> list[float]:
        return (await self.embed_queries([text], scope=scope))[0]

    async def embed_queries(self, texts: Sequence[str], *, scope: str = "") -> list[list[float]]:
        self.calls += 1
        await self.gate.wait()
        return [self._vector(text) for text in texts]


def gated_app(tmp_path: Path, embedder: GatedEmbedder, *, allowance: int) -> tuple[Litestar, Allowance]:
    store = InMemoryDocumentStore()
    engines = Engines(embedder=embedder, vector=InMemoryVectorIndex(store), lexical=InMemoryLexicalIndex(), store=store)
    settings = api_settings(tmp_path, query_cache_ttl_secs=0, embedding_query_cache_size=0, semantic_timeout_ms=600_000)
    app = create_app(settings, engines=engines)
    app.state[SEARCHES_IN_FLIGHT] = shares = Allowance(allowance)
    return app, shares


@asynccontextmanager
async def same_loop_client(app: Litestar) -> AsyncIterator[httpx.AsyncClient]:
    """A client whose requests run the app on this loop, concurrently, inside the app's lifespan."""
    transport = httpx.ASGITransport(app=app)
    async with app.lifespan(), httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        yield client


async def until(condition: Callable[[], bool]) -> None:
    """Let the app's tasks run until `condition` holds (bounded by a count of turns, not asserted on time)."""
    for _ in range(POLLS):
        if condition():
            return
        await asyncio.sleep(0.005)


async def test_a_second_large_batch_waits_until_the_first_gives_its_share_back(tmp_path: Path) -> None:
    embedder = GatedEmbedder()
    app, shares = gated_app(tmp_path, embedder, allowance=BATCH_CHARGE + SHORT_CHARGE)
    async with same_loop_client(app) as client:
        first = asyncio.create_task(client.post("/v1/search/batch", json=BATCH))
        await until(lambda: embedder.calls == 1)
        second = asyncio.create_task(client.post("/v1/search/batch", json=BATCH))
        await until(lambda: shares.waiting == 1)

        short = await client.post("/v1/search", json=SHORT)  # fits beside the first: not held behind the second

        assert (embedder.calls, shares.waiting, shares.taken) == (1, 1, BATCH_CHARGE)
        assert short.status_code == 200
        embedder.gate.set()
        answers = await asyncio.gather(first, second)

    assert [answer.status_code for answer in answers] == [200, 200]
    assert [len(answer.json()["results"]) for answer in answers] == [2, 2]
    assert (embedder.calls, shares.waiting, shares.taken) == (2, 0, 0)


async def test_a_cancelled_search_gives_its_share_back_and_the_waiting_one_runs(tmp_path: Path) -> None:
    embedder = GatedEmbedder()
    app, shares = gated_app(tmp_path, embedder, allowance=BATCH_CHARGE)
    async with same_loop_client(app) as client:
        held = asyncio.create_task(client.post("/v1/search/batch", json=BATCH))
        await until(lambda: embedder.calls == 1)
        waiting = asyncio.create_task(client.post("/v1/search/batch", json=BATCH))
        await until(lambda: shares.waiting == 1)

        held.cancel()
        await until(lambda: embedder.calls == 2)

        assert (shares.waiting, shares.taken) == (0, BATCH_CHARGE)
        embedder.gate.set()
        answer = await waiting

    assert held.cancelled()
    assert answer.status_code == 200
    assert shares.taken == 0


async def test_a_search_refused_by_the_service_gives_its_share_back(tmp_path: Path) -> None:
    embedder = GatedEmbedder()
    embedder.gate.set()
    app, shares = gated_app(tmp_path, embedder, allowance=BATCH_CHARGE)
    blank_second = {"project": PROJECT, "queries": [BATCH["queries"][0], {"query": "   ", "limit": 100}]}
    async with same_loop_client(app) as client:
        refused = await client.post("/v1/search/batch", json=blank_second)
        after = await client.post("/v1/search/batch", json=BATCH)

    assert (refused.status_code, refused.json()["field"]) == (400, "queries[1].query")
    assert after.status_code == 200
    assert shares.taken == 0


async def test_a_search_without_limit_is_charged_the_hits_the_flags_give_it(tmp_path: Path) -> None:
    """`rrf_final_k` from the flags file, not the environment's 10, is what a search without `limit` ranks."""
    flags_file = tmp_path / "flags.yaml"
    flags_file.write_text("rrf_final_k: 50\n")
    embedder = GatedEmbedder()
    store = InMemoryDocumentStore()
    engines = Engines(embedder=embedder, vector=InMemoryVectorIndex(store), lexical=InMemoryLexicalIndex(), store=store)
    settings = api_settings(
        tmp_path, query_cache_ttl_secs=0, embedding_query_cache_size=0, poimen_flags_file=flags_file
    )
    app = create_app(settings, engines=engines)
    app.state[SEARCHES_IN_FLIGHT] = shares = Allowance(BATCH_CHARGE)
    unlimited = {"project": PROJECT, "query": "bound", "strategy": "semantic"}
    async with same_loop_client(app) as client:
        held = asyncio.create_task(client.post("/v1/search", json=unlimited))
        await until(lambda: embedder.calls == 1)

        assert shares.taken == len("bound") * SEARCH_BYTES_PER_QUERY_CHAR + 50 * SEARCH_BYTES_PER_HIT
        embedder.gate.set()
        answer = await held

    assert answer.status_code == 200
    assert shares.taken == 0
