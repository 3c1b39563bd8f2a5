"""What a lookup and a store cost in the two shared caches, full, with many projects (timeit, one thread).

The answer cache (`QueryCache`) is filled to `--entries` answers spread over `--projects` projects, keyed as
the service keys them (a real plan and the knobs' identity), then timed: a hit, a miss, and a store of a new
answer, which evicts one. The query-vector cache (`QueryEmbeddingCache`) likewise, with 384-float vectors.
Prints the best of `--repeats` runs per operation, in microseconds of process CPU time per call.

Usage:
    .venv/bin/python scripts/bench_cache_ops.py --entries 10000 --projects 20
"""

from __future__ import annotations

import argparse
import functools
import itertools
import time
import timeit
from typing import TYPE_CHECKING

from app.engines.embedder import QueryEmbeddingCache
from app.knobs import SearchKnobs
from app.query.optimizer import QueryOptimizer
from app.query.planner import SearchOptions, build_plan
from app.search.cache import QueryCache, QueryCacheKey
from app.search.knob_source import ResolvedKnobs

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from app.domain.models import SearchPlan

QUERY = "how do I rotate the TLS certificates of the ingress"
CALLS = 20_000
KNOBS = SearchKnobs()


@functools.cache
def plan_for(project: str) -> SearchPlan:
    return build_plan(QueryOptimizer().analyze(QUERY), SearchOptions(project=project), KNOBS)


def answer_key(project: str, number: int) -> QueryCacheKey:
    return QueryCache.make_key(
        query=f"{QUERY} {number}",
        plan=plan_for(project),
        generation=7,
        knobs_version=1,
        arm="hybrid",
        auth_scope="grants:0123456789abcdef0123456789abcdef",
        knobs=ResolvedKnobs(knobs=KNOBS, version=1).identity,
    )


def best_us(operation: Callable[[], object], repeats: int) -> float:
    # CPU time, not wall time: on a shared machine other processes' turns would count otherwise.
    return min(timeit.repeat(operation, number=CALLS, repeat=repeats, timer=time.process_time)) / CALLS * 1e6


def bench_answers(entries: int, projects: int, repeats: int) -> dict[str, float]:
    cache: QueryCache[str] = QueryCache(ttl_s=3600, max_size=entries)
    keys = [answer_key(f"project-{number % projects}", number) for number in range(entries)]
    for key in keys:
        cache.put(key, "answer")
    stored = itertools.cycle(keys[-entries // 2 :])  # the recent half: never evicted by the stores below
    absent = answer_key("project-0", -1)
    fresh: Iterator[QueryCacheKey] = (
        answer_key(f"project-{number % projects}", number) for number in itertools.count(entries)
    )
    new_keys = [next(fresh) for _ in range(CALLS * repeats)]
    new_iter = iter(new_keys)
    return {
        "answer get hit": best_us(lambda: cache.get(next(stored)), repeats),
        "answer get miss": best_us(lambda: cache.get(absent), repeats),
        "answer put (evicts one)": best_us(lambda: cache.put(next(new_iter), "answer"), repeats),
    }


def bench_vectors(entries: int, projects: int, repeats: int) -> dict[str, float]:
    cache = QueryEmbeddingCache(entries, lowercase=True)
    vector = [0.01] * 384
    keys = [cache.key("all-MiniLM-L6-v2", f"{QUERY} {n}", scope=f"project-{n % projects}") for n in range(entries)]
    for key in keys:
        cache.put(key, vector)
    stored = itertools.cycle(keys[-entries // 2 :])
    new_keys = iter(
        [
            cache.key("all-MiniLM-L6-v2", f"{QUERY} {n}", scope=f"project-{n % projects}")
            for n in range(entries, entries + CALLS * repeats)
        ]
    )
    return {
        "vector get hit": best_us(lambda: cache.get(next(stored)), repeats),
        "vector put (evicts one)": best_us(lambda: cache.put(next(new_keys), vector), repeats),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--projects", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    arguments = parser.parse_args()
    results = {
        **bench_answers(arguments.entries, arguments.projects, arguments.repeats),
        **bench_vectors(arguments.entries, arguments.projects, arguments.repeats),
    }
    for name, microseconds in results.items():
        print(f"{name:<26} {microseconds:6.2f} µs")


if __name__ == "__main__":
    main()
