from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
import tracemalloc
from types import SimpleNamespace

import pytest
from prometheus_client import REGISTRY

from app.domain.models import Filters, FusionMethod, FusionSettings, LexicalQuery, SearchPlan, SearchStrategy
from app.domain.reordering import EvidencePreferences, NeighbourSharing
from app.domain.results import SearchResult
from app.knobs import SearchKnobs
from app.query.optimizer import QueryOptimizer
from app.search.cache import QueryCache, QueryCacheKey
from app.search.cached_answer import cached_outcome
from app.search.calls import LEG_HIT_BYTES, SearchOutcome, outcome_size_bytes
from app.search.knob_source import ResolvedKnobs


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


BASE_PLAN = SearchPlan(
    semantic_text="how to rotate certs",
    lexical_query=LexicalQuery(text="rotate certs"),
    filters=Filters(project_id="alpha", tags=("ops",)),
    strategy=SearchStrategy.HYBRID,
    strategy_confidence=0.8,
    fusion=FusionSettings(method=FusionMethod.RRF, rrf_k=60, weights={"semantic": 0.6, "lexical": 0.4}),
    semantic_retrieve_k=50,
    lexical_retrieve_k=50,
    limit=10,
    cascading_multiplier=4,
    max_chunks_per_document=None,
    min_score=None,
    lexical_timeout_s=2.0,
    semantic_timeout_s=5.0,
    evidence=EvidencePreferences(),
    session_cap=None,
    neighbours=NeighbourSharing(),
)
BASE_INPUTS: dict[str, object] = {
    "generation": 7,
    "query": "how to rotate certs",
    "plan": BASE_PLAN,
    "knobs_version": 3,
    "arm": "hybrid",
    "auth_scope": "read:alpha",
    "knobs": ResolvedKnobs(knobs=SearchKnobs(), version=3).identity,
}

# One different value per input; each must give a different key.
CHANGED_INPUTS: dict[str, object] = {
    "generation": 8,
    "project_id": dataclasses.replace(BASE_PLAN, filters=Filters(project_id="beta", tags=("ops",))),
    "query": "how to rotate keys",
    "plan": dataclasses.replace(BASE_PLAN, limit=20),
    "knobs_version": 4,
    "arm": "semantic",
    "auth_scope": "read:alpha,beta",
    "knobs": ResolvedKnobs(knobs=SearchKnobs(lexical_fuzziness=True), version=3).identity,
}
CHANGED_PLAN_FIELDS: dict[str, object] = {
    "semantic_text": "rotate keys",
    "lexical_query": LexicalQuery(text="rotate keys"),
    "filters": Filters(project_id="alpha", tags=("dev",)),
    "strategy": SearchStrategy.LEXICAL,
    "strategy_confidence": 0.9,
    "fusion": FusionSettings(method=FusionMethod.RRF, rrf_k=61, weights={"semantic": 0.6, "lexical": 0.4}),
    "semantic_retrieve_k": 51,
    "lexical_retrieve_k": 51,
    "limit": 20,
    "cascading_multiplier": 5,
    "max_chunks_per_document": 1,
    "min_score": 0.2,
    "lexical_timeout_s": 1.0,
    "semantic_timeout_s": 1.0,
    "evidence": EvidencePreferences(prefer_dated=True, date_boost=1.5),
    "session_cap": 3,
    "neighbours": NeighbourSharing(share=0.4, window_turns=2),
}


def plan_with(**changes: object) -> SearchPlan:
    return dataclasses.replace(BASE_PLAN, **changes)  # type: ignore[arg-type]


def cache_lookups(result: str) -> float:
    return REGISTRY.get_sample_value("poimen_query_cache_requests_total", {"result": result}) or 0.0


def make_cache(clock: FakeClock | None = None, *, ttl_s: float = 60.0, max_size: int = 100) -> QueryCache[str]:
    return QueryCache(ttl_s=ttl_s, max_size=max_size, clock=clock or FakeClock())


def key_for(cache: QueryCache[str], **changes: object) -> QueryCacheKey:
    if "project_id" in changes:
        changes["plan"] = plan_with(filters=Filters(project_id=str(changes.pop("project_id")), tags=("ops",)))
    if "limit" in changes:
        changes["plan"] = plan_with(limit=changes.pop("limit"))
    return cache.make_key(**{**BASE_INPUTS, **changes})  # type: ignore[arg-type]


def test_a_stored_answer_is_a_hit_and_counted() -> None:
    cache = make_cache()
    cache.put(key_for(cache), "answer")
    hits_before = cache_lookups("hit")

    value = cache.get(key_for(cache))

    assert value == "answer"
    assert cache_lookups("hit") == hits_before + 1


def test_an_unknown_key_is_a_miss_and_counted() -> None:
    cache = make_cache()
    misses_before = cache_lookups("miss")

    value = cache.get(key_for(cache))

    assert value is None
    assert cache_lookups("miss") == misses_before + 1


def test_an_entry_expires_after_its_ttl() -> None:
    clock = FakeClock()
    cache = make_cache(clock, ttl_s=30.0)
    cache.put(key_for(cache), "answer")

    clock.now += 29.9
    still_there = cache.get(key_for(cache))
    clock.now += 0.2
    expired = cache.get(key_for(cache))

    assert still_there == "answer"
    assert expired is None


def test_a_new_generation_hides_the_projects_earlier_entries_but_not_others() -> None:
    cache = make_cache()
    cache.put(key_for(cache), "alpha answer")
    cache.put(key_for(cache, project_id="beta"), "beta answer")

    after_a_write = key_for(cache, generation=8)  # any replica wrote to alpha

    assert cache.get(after_a_write) is None
    assert cache.get(key_for(cache, project_id="beta")) == "beta answer"


def test_an_answer_computed_before_a_write_is_never_served_after_it() -> None:
    cache = make_cache()
    key_before_write = key_for(cache)  # the generation is read before the search runs

    cache.put(key_before_write, "stale answer")  # ... and stored after a write moved it to 8

    assert cache.get(key_for(cache, generation=8)) is None


class SteppedGenerations:
    """Generations a test hands out one read at a time: each read waits for its value."""

    def __init__(self) -> None:
        self.pending: list[asyncio.Future[int]] = []

    async def project_generation(self, project_id: str) -> int:
        answer: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.pending.append(answer)
        return await answer


async def read(cache: QueryCache[str], generations: SteppedGenerations, generation: int) -> int:
    reading = asyncio.ensure_future(cache.read_generation(generations, "alpha"))
    await asyncio.sleep(0)
    generations.pending.pop().set_result(generation)
    return await reading


async def test_a_generation_lower_than_an_earlier_read_empties_the_cache() -> None:
    cache, generations = make_cache(), SteppedGenerations()
    await read(cache, generations, 7)
    cache.put(key_for(cache), "answer at 7, before PostgreSQL was restored to generation 5")
    cache.put(key_for(cache, project_id="beta"), "beta answer")

    restored = await read(cache, generations, 5)

    assert restored == 5
    assert len(cache) == 0  # every project: a restore set every counter back
    assert cache.get(key_for(cache)) is None


async def test_a_read_that_began_before_a_write_and_ended_after_a_later_read_empties_nothing() -> None:
    cache, generations = make_cache(), SteppedGenerations()
    await read(cache, generations, 6)
    cache.put(key_for(cache), "answer at 7")
    slow = asyncio.ensure_future(cache.read_generation(generations, "alpha"))  # began at 6 ...
    await asyncio.sleep(0)
    slow_answer = generations.pending.pop()
    await read(cache, generations, 7)  # ... a write, and a read of 7 that ended first

    slow_answer.set_result(6)

    assert await slow == 6
    assert cache.get(key_for(cache)) == "answer at 7"


@pytest.mark.parametrize("name", sorted(CHANGED_INPUTS))
def test_every_input_changes_the_key(name: str) -> None:
    cache = make_cache()
    change = CHANGED_INPUTS[name]
    changes = {"plan": change} if name == "project_id" else {name: change}

    assert key_for(cache, **changes) != key_for(cache)


def test_changed_inputs_cover_every_key_field() -> None:
    fields = {field.name for field in dataclasses.fields(QueryCacheKey)}

    assert fields == set(CHANGED_INPUTS)


@pytest.mark.parametrize("name", sorted(CHANGED_PLAN_FIELDS))
def test_every_plan_field_changes_the_key(name: str) -> None:
    cache = make_cache()

    assert key_for(cache, plan=plan_with(**{name: CHANGED_PLAN_FIELDS[name]})) != key_for(cache)


def test_changed_plan_fields_cover_every_plan_field() -> None:
    assert {field.name for field in dataclasses.fields(SearchPlan)} == set(CHANGED_PLAN_FIELDS)


def test_whitespace_and_weight_order_do_not_change_the_key() -> None:
    cache = make_cache()
    reordered = FusionSettings(method=FusionMethod.RRF, rrf_k=60, weights={"lexical": 0.4, "semantic": 0.6})

    same = key_for(cache, query="  how to   rotate\tcerts ", plan=plan_with(fusion=reordered))

    assert same == key_for(cache)
    assert hash(same) == hash(key_for(cache))


@pytest.mark.parametrize(("ttl_s", "max_size"), [(0.0, 100), (60.0, 0)])
def test_zero_ttl_or_size_disables_the_cache(ttl_s: float, max_size: int) -> None:
    cache = make_cache(ttl_s=ttl_s, max_size=max_size)
    lookups_before = cache_lookups("hit") + cache_lookups("miss")

    cache.put(key_for(cache), "answer")

    assert not cache.enabled
    assert cache.get(key_for(cache)) is None
    assert len(cache) == 0
    assert cache_lookups("hit") + cache_lookups("miss") == lookups_before


def test_a_new_ttl_applies_to_later_entries_and_zero_disables() -> None:
    clock = FakeClock()
    cache = make_cache(clock, ttl_s=30.0)
    cache.put(key_for(cache), "old ttl")

    cache.set_ttl(5.0)
    cache.put(key_for(cache), "new ttl")
    clock.now += 6.0
    after_new_ttl = cache.get(key_for(cache))
    cache.set_ttl(0.0)
    cache.put(key_for(cache), "disabled")

    assert after_new_ttl is None
    assert not cache.enabled
    assert cache.get(key_for(cache)) is None


def test_the_oldest_entries_go_when_full() -> None:
    cache = make_cache(max_size=2)
    for limit in (1, 2, 3):
        cache.put(key_for(cache, limit=limit), f"answer {limit}")

    assert len(cache) == 2
    assert cache.get(key_for(cache, limit=1)) is None
    assert cache.get(key_for(cache, limit=3)) == "answer 3"


def test_concurrent_puts_and_gets_do_not_corrupt_the_cache() -> None:
    cache = make_cache(max_size=50)
    errors: list[BaseException] = []

    def worker(worker_id: int) -> None:
        try:
            for i in range(300):
                key = key_for(cache, limit=i % 80, project_id=f"p{worker_id % 3}", generation=i // 50)
                cache.put(key, f"{worker_id}-{i}")
                cache.get(key)
        except BaseException as error:  # any error in a thread must fail the test
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    assert len(cache) <= 50


def test_max_bytes_evicts_the_least_recent_answers_by_size() -> None:
    cache: QueryCache[str] = QueryCache(ttl_s=60.0, max_size=100, max_bytes=1000, size_of=len, clock=FakeClock())
    for limit in (1, 2, 3):
        cache.put(key_for(cache, limit=limit), str(limit) * 400)

    assert len(cache) == 2
    assert cache.charged_bytes == 800
    assert cache.get(key_for(cache, limit=1)) is None
    assert cache.get(key_for(cache, limit=3)) == "3" * 400


def test_an_answer_larger_than_max_bytes_is_not_kept() -> None:
    cache: QueryCache[str] = QueryCache(ttl_s=60.0, max_size=100, max_bytes=1000, size_of=len, clock=FakeClock())
    cache.put(key_for(cache, limit=1), "small")

    cache.put(key_for(cache, limit=2), "x" * 1001)

    assert cache.get(key_for(cache, limit=2)) is None
    assert cache.get(key_for(cache, limit=1)) == "small"


def test_the_entry_count_still_bounds_small_answers_under_a_byte_bound() -> None:
    cache: QueryCache[str] = QueryCache(ttl_s=60.0, max_size=3, max_bytes=1000, size_of=len, clock=FakeClock())
    for limit in range(1, 6):
        cache.put(key_for(cache, limit=limit), "tiny")

    assert len(cache) == 3
    assert cache.charged_bytes <= 1000


def test_zero_max_bytes_disables_the_cache() -> None:
    cache: QueryCache[str] = QueryCache(ttl_s=60.0, max_size=100, max_bytes=0, clock=FakeClock())

    cache.put(key_for(cache), "answer")

    assert not cache.enabled
    assert cache.get(key_for(cache)) is None


def answer(text: str, leg_hits: int, query: str = "q") -> SimpleNamespace:
    chunk = SimpleNamespace(text=text, context="", source="notes/a.md", section_title="", breadcrumb=("a",), tags=())
    result = SimpleNamespace(hits=(SimpleNamespace(chunk=chunk),), leg_hits={"semantic": (None,) * leg_hits})
    return SimpleNamespace(result=result, analysis=SimpleNamespace(raw_query=query))


def test_an_answers_estimated_size_grows_with_its_texts_and_leg_hits() -> None:
    small = outcome_size_bytes(answer("x" * 100, 0))  # type: ignore[arg-type]

    assert outcome_size_bytes(answer("x" * 1100, 0)) == small + 1000  # type: ignore[arg-type]
    assert outcome_size_bytes(answer("x" * 100, 10)) == small + 10 * LEG_HIT_BYTES  # type: ignore[arg-type]


def test_an_answers_estimated_size_counts_what_its_query_analysis_holds() -> None:
    # An 8,000-character query's analysis holds its text several times over and its tokens: ~14 bytes per
    # character measured (tracemalloc), where the estimate charged none, so answers to long queries with
    # few hits were charged 7 KiB for ~110 KiB held and the byte bound let the cache grow past a GiB.
    query = "word " * 1600
    analysis = QueryOptimizer().analyze(query)
    tracemalloc.start()
    held = QueryOptimizer().analyze(query)
    measured, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()

    charged = outcome_size_bytes(answer("x", 0, query)) - outcome_size_bytes(answer("x", 0))  # type: ignore[arg-type]

    assert held.raw_query == analysis.raw_query
    assert charged >= measured


def test_a_cached_answer_reports_this_requests_optimize_and_total_times() -> None:
    first = SearchOutcome(
        analysis=QueryOptimizer().analyze("forward port"),
        plan=BASE_PLAN,
        result=SearchResult(
            hits=(), strategy=BASE_PLAN.strategy, fusion_method=FusionMethod.RRF, legs={}, stage_ms={"embed": 6.0}
        ),
        arm="control",
        cached=False,
        optimize_ms=7.5,
        total_ms=30.0,
    )

    this_query = QueryOptimizer().analyze("Forward port")
    hit = cached_outcome(first, analysis=this_query, arm="control", optimize_ms=0.25, started=time.perf_counter())

    assert hit.cached is True
    assert hit.optimize_ms == 0.25  # the first request's 7.5 ms was shown on every hit
    assert hit.analysis is this_query  # and the first request's reading of its own query
