"""RecentReads: a value is trusted for its TTL, held during a re-read, and the oldest key goes first."""

from __future__ import annotations

import pytest

from app.domain.recent_reads import RecentReads


def test_a_value_is_fresh_for_its_ttl_and_then_only_the_last() -> None:
    reads: RecentReads[str, int] = RecentReads(ttl_s=10, max_keys=4)
    reads.store("p", 1, now=100)

    assert reads.fresh("p", now=110) == 1
    assert reads.fresh("p", now=110.5) is None
    assert reads.last("p") == 1
    assert reads.fresh("q", now=100) is None
    assert reads.last("q") is None


def test_holding_makes_the_last_value_fresh_again_and_holds_nothing_unknown() -> None:
    reads: RecentReads[str, int] = RecentReads(ttl_s=10, max_keys=4)
    reads.store("p", 1, now=0)

    reads.hold("p", now=50)
    reads.hold("q", now=50)

    assert reads.fresh("p", now=55) == 1
    assert reads.last("q") is None
    assert len(reads) == 1


def test_past_max_keys_the_key_stored_longest_ago_goes_first() -> None:
    reads: RecentReads[str, int] = RecentReads(ttl_s=10, max_keys=2)
    reads.store("a", 1, now=0)
    reads.store("b", 2, now=1)
    reads.store("a", 3, now=2)  # stored again: now the newest
    reads.store("c", 4, now=3)

    assert reads.last("b") is None
    assert (reads.last("a"), reads.last("c"), len(reads)) == (3, 4, 2)


@pytest.mark.parametrize(("ttl_s", "max_keys"), [(-1, 4), (10, 0)])
def test_a_negative_ttl_or_no_room_is_refused(ttl_s: float, max_keys: int) -> None:
    with pytest.raises(ValueError, match="ttl_s must be"):
        RecentReads(ttl_s=ttl_s, max_keys=max_keys)
