from __future__ import annotations

import random
from collections import OrderedDict

import pytest

from app.domain.fair_eviction import ScopeFairCache


class ReferenceCache:
    """The eviction rule spelt out by scanning every scope on every eviction: what the heap must agree with."""

    def __init__(self, capacity: int, ttl_s: float) -> None:
        self.capacity, self.ttl_s = capacity, ttl_s
        self.entries: OrderedDict[str, tuple[str, int, int, float]] = OrderedDict()  # least recently used first

    def get(self, key: str, now: float) -> int | None:
        if key not in self.entries:
            return None
        if now >= self.entries[key][3]:
            del self.entries[key]
            return None
        self.entries.move_to_end(key)
        return self.entries[key][2]

    def put(self, key: str, value: int, scope: str, charge: int, now: float) -> None:
        if charge > self.capacity:
            return
        for expired in [k for k, entry in self.entries.items() if now >= entry[3]]:
            del self.entries[expired]
        self.entries.pop(key, None)
        self.entries[key] = (scope, charge, value, now + self.ttl_s)
        while sum(entry[1] for entry in self.entries.values()) > self.capacity:
            self.evict(protected=key)

    def evict(self, *, protected: str) -> None:
        charges: dict[str, int] = {}
        for scope, charge, _, _ in self.entries.values():
            charges[scope] = charges.get(scope, 0) + charge
        for scope in sorted(charges, key=lambda name: (-charges[name], name)):
            oldest = next(k for k, entry in self.entries.items() if entry[0] == scope)
            if oldest != protected:
                del self.entries[oldest]
                return


def test_eviction_agrees_with_a_scan_of_every_scope_over_random_traffic() -> None:
    generator = random.Random(20261204)
    cache: ScopeFairCache[str, int] = ScopeFairCache(capacity=100, ttl_s=50.0)
    reference = ReferenceCache(capacity=100, ttl_s=50.0)
    now = 0.0

    for step in range(5000):
        now += generator.random()
        scope = generator.choice(["alpha", "beta", "gamma", "delta", "epsilon"][: generator.randint(1, 5)])
        key = f"{scope}:{generator.randint(0, 40)}"
        if generator.random() < 0.4:
            assert cache.get(key, now=now) == reference.get(key, now), step
        else:
            charge = generator.choice([0, 1, 1, 2, 5, 20, 60, 101])
            cache.put(key, step, scope=scope, charge=charge, now=now)
            reference.put(key, step, scope, charge, now)

        assert len(cache) == len(reference.entries), step
        assert cache.charged == sum(entry[1] for entry in reference.entries.values()) <= 100


def test_a_scope_within_its_equal_share_keeps_every_entry_under_another_scopes_flood() -> None:
    cache: ScopeFairCache[str, int] = ScopeFairCache(capacity=30)
    for number in range(10):
        cache.put(f"small:{number}", number, scope="small", charge=1)

    for number in range(1000):
        cache.put(f"flood:{number}", number, scope="flood", charge=1)

    assert [cache.get(f"small:{number}") for number in range(10)] == list(range(10))
    assert len(cache) == 30
    assert cache.get("flood:979") is None
    assert cache.get("flood:980") == 980


def test_the_entry_being_put_is_kept_when_it_is_its_scopes_only_one() -> None:
    cache: ScopeFairCache[str, str] = ScopeFairCache(capacity=10)
    for key in ("b1", "b2", "b3"):
        cache.put(key, key, scope="beta", charge=1)

    cache.put("a1", "large", scope="alpha", charge=8)  # alpha is charged the most, but holds only this entry

    assert cache.get("a1") == "large"
    assert [cache.get(key) for key in ("b1", "b2", "b3")] == [None, "b2", "b3"]
    assert cache.charged == 10


def test_an_entry_charged_more_than_the_capacity_is_refused_and_the_old_one_stays() -> None:
    cache: ScopeFairCache[str, str] = ScopeFairCache(capacity=10)
    cache.put("a", "old", scope="alpha", charge=3)

    kept = cache.put("a", "too large", scope="alpha", charge=11)

    assert kept is False
    assert cache.get("a") == "old"


def test_an_entry_expires_at_exactly_its_ttl_and_a_read_does_not_extend_it() -> None:
    cache: ScopeFairCache[str, str] = ScopeFairCache(capacity=10, ttl_s=30.0)
    cache.put("a", "answer", scope="alpha", charge=1, now=100.0)

    before = cache.get("a", now=129.9)
    at_ttl = cache.get("a", now=130.0)

    assert before == "answer"
    assert at_ttl is None
    assert len(cache) == 0


@pytest.mark.parametrize(("capacity", "ttl_s"), [(0, None), (10, 0.0), (10, -1.0)])
def test_a_cache_that_could_hold_nothing_is_refused(capacity: int, ttl_s: float | None) -> None:
    with pytest.raises(ValueError, match="capacity must be >= 1"):
        ScopeFairCache[str, str](capacity=capacity, ttl_s=ttl_s)
