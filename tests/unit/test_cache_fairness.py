"""One project's traffic cannot empty the shared caches for another (the noisy neighbour)."""

from __future__ import annotations

import dataclasses

from app.domain.models import Filters
from app.engines.embedder import QueryEmbeddingCache
from app.search.cache import QueryCache, QueryCacheKey
from tests.unit.test_cache import BASE_INPUTS, BASE_PLAN, FakeClock


def key_of(project_id: str, query: str) -> QueryCacheKey:
    plan = dataclasses.replace(BASE_PLAN, filters=Filters(project_id=project_id))
    return QueryCache.make_key(**{**BASE_INPUTS, "plan": plan, "query": query})  # type: ignore[arg-type]


def answer_cache(*, max_size: int = 100, max_bytes: int = 1000, clock: FakeClock | None = None) -> QueryCache[str]:
    return QueryCache(ttl_s=60.0, max_size=max_size, max_bytes=max_bytes, size_of=len, clock=clock or FakeClock())


def test_a_project_flooding_the_answer_cache_leaves_a_small_projects_entries() -> None:
    cache = answer_cache(max_size=10)
    cache.put(key_of("beta", "b1"), "beta 1")
    cache.put(key_of("beta", "b2"), "beta 2")

    for number in range(100):
        cache.put(key_of("alpha", f"a{number}"), f"alpha {number}")

    assert cache.get(key_of("beta", "b1")) == "beta 1"
    assert cache.get(key_of("beta", "b2")) == "beta 2"
    assert len(cache) == 10
    assert cache.get(key_of("alpha", "a99")) == "alpha 99"
    assert cache.get(key_of("alpha", "a91")) is None  # alpha keeps its 8 most recent: a92-a99


def test_fairness_counts_bytes_not_entries() -> None:
    cache = answer_cache(max_bytes=1000)
    cache.put(key_of("beta", "big"), "b" * 400)

    for number in range(20):
        cache.put(key_of("alpha", f"a{number}"), "a" * 100)

    assert cache.get(key_of("beta", "big")) == "b" * 400
    assert cache.charged_bytes <= 1000
    assert len(cache) == 7  # beta's 400 bytes and alpha's six most recent 100-byte answers


def test_the_project_holding_the_most_gives_up_its_least_recently_used_answer() -> None:
    cache = answer_cache(max_size=6)
    for query in ("a1", "a2"):
        cache.put(key_of("alpha", query), query)
    for query in ("b1", "b2", "b3", "b4"):
        cache.put(key_of("beta", query), query)
    assert cache.get(key_of("beta", "b1")) == "b1"  # now beta's most recent; a1 is the least recent of all

    cache.put(key_of("alpha", "a3"), "a3")

    assert cache.get(key_of("beta", "b2")) is None
    assert [cache.get(key_of("beta", query)) for query in ("b1", "b3", "b4")] == ["b1", "b3", "b4"]
    assert [cache.get(key_of("alpha", query)) for query in ("a1", "a2", "a3")] == ["a1", "a2", "a3"]


def test_one_project_alone_fills_the_whole_answer_cache_in_lru_order() -> None:
    cache = answer_cache(max_size=4)
    for query in ("a1", "a2", "a3", "a4"):
        cache.put(key_of("alpha", query), query)
    assert cache.get(key_of("alpha", "a1")) == "a1"

    cache.put(key_of("alpha", "a5"), "a5")

    assert len(cache) == 4
    assert cache.get(key_of("alpha", "a2")) is None
    assert [cache.get(key_of("alpha", query)) for query in ("a1", "a3", "a4", "a5")] == ["a1", "a3", "a4", "a5"]


def test_expired_answers_make_room_before_a_live_answer_of_another_project_goes() -> None:
    clock = FakeClock()
    cache = answer_cache(max_size=4, clock=clock)
    for query in ("a1", "a2", "a3"):
        cache.put(key_of("alpha", query), query)
    clock.now += 30.0
    cache.put(key_of("beta", "b1"), "b1")
    clock.now += 30.0  # alpha's three have lived their 60 s; beta's has 30 s left

    for query in ("c1", "c2", "c3"):
        cache.put(key_of("gamma", query), query)

    assert cache.get(key_of("beta", "b1")) == "b1"
    assert len(cache) == 4


def test_a_project_flooding_the_query_vector_cache_leaves_a_small_projects_vectors() -> None:
    cache = QueryEmbeddingCache(8, lowercase=False)
    beta = cache.key("model", "beta question", scope="beta")
    cache.put(beta, [1.0])

    for number in range(50):
        cache.put(cache.key("model", f"alpha question {number}", scope="alpha"), [float(number)])

    assert cache.get(beta) == [1.0]
    assert cache.get(cache.key("model", "alpha question 49", scope="alpha")) == [49.0]
    assert cache.get(cache.key("model", "alpha question 42", scope="alpha")) is None  # alpha keeps 43-49


def test_one_project_alone_fills_the_whole_query_vector_cache() -> None:
    cache = QueryEmbeddingCache(4, lowercase=False)
    keys = [cache.key("model", f"question {number}", scope="alpha") for number in range(5)]
    for number, key in enumerate(keys):
        cache.put(key, [float(number)])

    assert [cache.get(key) for key in keys] == [None, [1.0], [2.0], [3.0], [4.0]]
