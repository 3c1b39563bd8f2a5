"""Per-caller rate limits: a caller over its rate gets 429 + Retry-After, others are untouched.

(Shedding past MAX_CONCURRENT_REQUESTS needs real concurrency: tests/integration/test_overload.py.)
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import TYPE_CHECKING

from prometheus_client import REGISTRY

from app.api.app import create_app
from app.engines.memory import InMemoryDocumentStore
from app.engines.memory_lexical import InMemoryLexicalIndex
from app.engines.memory_vectors import InMemoryVectorIndex
from app.search.rate_limit import CallerRateLimit
from app.wiring.engines import Engines
from tests.api.conftest import api_settings, app_client

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

SEARCH_SECONDS = 0.3


class SlowEmbedder:
    """Deterministic 8-d vectors; every query embedding takes SEARCH_SECONDS."""

    name = "slow"
    model_name = "slow-model"
    dimensions = 8

    async def embed_query(self, text: str, *, scope: str = "") -> list[float]:
        await asyncio.sleep(SEARCH_SECONDS)
        return self._vector(text)

    async def embed_queries(self, texts: Sequence[str], *, scope: str = "") -> list[list[float]]:
        return [await self.embed_query(text) for text in texts]

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return [self._vector(text) for text in texts]

    @staticmethod
    def _vector(text: str) -> list[float]:
        digest = hashlib.sha256(text.encode()).digest()
        return [byte / 255 for byte in digest[:8]]


def memory_engines() -> Engines:
    store = InMemoryDocumentStore()
    return Engines(
        embedder=SlowEmbedder(), vector=InMemoryVectorIndex(store), lexical=InMemoryLexicalIndex(), store=store
    )


def shed(reason: str) -> float:
    return REGISTRY.get_sample_value("poimen_requests_shed_total", {"reason": reason}) or 0.0


async def test_a_caller_over_its_rate_gets_429_with_retry_after_and_others_do_not(tmp_path: Path) -> None:
    settings = api_settings(tmp_path, rate_limit_per_caller_rps=0.5, rate_limit_burst=2, query_cache_ttl_secs=0)
    before = shed("rate_limit")
    params = {"query": "backups", "project": "rated", "strategy": "lexical"}
    async with app_client(create_app(settings, engines=memory_engines())) as client:
        greedy = [
            (await client.get("/memory/query", params=params, headers={"x-client-id": "greedy"})) for _ in range(4)
        ]
        other = await client.get("/memory/query", params=params, headers={"x-client-id": "other"})

    assert [answer.status_code for answer in greedy] == [200, 200, 429, 429]
    assert int(greedy[2].headers["retry-after"]) >= 1
    assert greedy[2].json()["status"] == 429
    assert other.status_code == 200
    assert shed("rate_limit") == before + 2


def test_token_buckets_refill_at_the_rate_and_cap_at_the_burst() -> None:
    now = [100.0]
    limit = CallerRateLimit(clock=lambda: now[0])

    first = [limit.take("a", rate_per_s=2.0, burst=3) for _ in range(4)]
    now[0] += 0.5  # one token back
    after_half_a_second = [limit.take("a", rate_per_s=2.0, burst=3) for _ in range(2)]
    now[0] += 60.0  # never more than the burst
    after_a_minute = [limit.take("a", rate_per_s=2.0, burst=3) for _ in range(4)]

    assert first[:3] == [0.0, 0.0, 0.0]
    assert first[3] == 0.5  # seconds until the next token
    assert after_half_a_second[0] == 0.0
    assert after_half_a_second[1] > 0
    assert after_a_minute[:3] == [0.0, 0.0, 0.0]
    assert after_a_minute[3] > 0
    assert limit.take("b", rate_per_s=0.0, burst=1) == 0.0  # rate 0: no limit


def test_the_caller_map_stays_bounded_and_evicts_the_caller_idle_longest() -> None:
    now = [0.0]
    limit = CallerRateLimit(clock=lambda: now[0], max_callers=3)

    def spent(caller: str) -> bool:
        """Take a token (one per caller, refilled only after ~1,000 s); True when the caller had none left."""
        now[0] += 1.0
        return limit.take(caller, rate_per_s=0.001, burst=1) > 0

    first = [spent(caller) for caller in ("a", "b", "c")]  # each spends its only token
    a_again = spent("a")  # "a" is the most recent now; "b" is idle longest
    newcomer = spent("d" * 100_000)  # a new caller, of any length, evicts "b"
    c_again = spent("c")
    b_again = spent("b")  # evicted: a full bucket again

    assert first == [False, False, False]
    assert (a_again, newcomer, c_again, b_again) == (True, False, True, False)
    assert len(limit) == 3
