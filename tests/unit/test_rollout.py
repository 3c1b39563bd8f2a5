from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

from app.search.rollout import assign_arm, caller_bucket, caller_key, overlap_at_k

CALLERS = [caller_key(f"user-{n}", None, None) for n in range(10_000)]


@pytest.mark.parametrize("percent", [10.0, 50.0, 90.0])
def test_the_hybrid_share_of_10000_callers_is_within_two_points_of_the_setting(percent: float) -> None:
    hybrid = sum(assign_arm(key, hybrid_percent=percent) == "hybrid" for key in CALLERS)

    assert abs(hybrid / len(CALLERS) * 100 - percent) <= 2.0


@pytest.mark.parametrize(
    ("percent", "arm"), [(0.0, "semantic"), (100.0, "hybrid"), (-5.0, "semantic"), (250.0, "hybrid")]
)
def test_the_ends_of_the_range_send_everyone_to_one_arm(percent: float, arm: str) -> None:
    assert {assign_arm(key, hybrid_percent=percent) for key in CALLERS[:500]} == {arm}


def test_one_caller_keeps_its_arm_across_calls() -> None:
    arms = {assign_arm("sub:alice", hybrid_percent=50.0) for _ in range(100)}

    assert len(arms) == 1


def test_one_caller_gets_the_same_arm_in_another_process() -> None:
    # A fresh interpreter has a different str hash seed; the arm must not depend on it.
    program = (
        "from app.search.rollout import assign_arm, caller_bucket;"
        "print(caller_bucket('sub:alice'), assign_arm('sub:alice', hybrid_percent=50.0))"
    )

    other = subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "random"},
        cwd=Path(__file__).parents[2],
    )

    assert other.stdout.split() == [str(caller_bucket("sub:alice")), assign_arm("sub:alice", hybrid_percent=50.0)]


def test_the_bucket_is_pinned_to_sha256() -> None:
    # sha256(b"sub:alice")[:8] as a big-endian integer, mod 10000; changing the hash would reshuffle every caller.
    expected = int.from_bytes(hashlib.sha256(b"sub:alice").digest()[:8], "big") % 10_000

    assert caller_bucket("sub:alice") == expected


def test_raising_the_percentage_never_moves_a_caller_back_to_semantic() -> None:
    percents = [0.0, 5.0, 10.0, 25.0, 50.0, 50.5, 75.0, 90.0, 100.0]

    for key in CALLERS[:2000]:
        arms = [assign_arm(key, hybrid_percent=p) for p in percents]
        first_hybrid = arms.index("hybrid")
        assert set(arms[first_hybrid:]) == {"hybrid"}, key


def test_caller_key_prefers_subject_then_client_id_then_address() -> None:
    assert caller_key("alice", "cli-7", "10.0.0.1") == "sub:alice"
    assert caller_key(None, "cli-7", "10.0.0.1") == "client:cli-7"
    assert caller_key("  ", "", "10.0.0.1") == "addr:10.0.0.1"
    assert caller_key(None, None, None) == "anonymous"


def test_a_subject_and_a_client_id_spelled_alike_are_different_callers() -> None:
    assert caller_key("alice", None, None) != caller_key(None, "alice", None)


@pytest.mark.parametrize(
    ("served", "shadow", "expected"),
    [
        (["a", "b", "c"], ["a", "b", "c"], 1.0),
        (["a", "b", "c", "d"], ["d", "e", "f", "g"], 0.25),
        (["a", "b"], ["a", "b", "c", "d"], 0.5),
        ([], [], 1.0),
        (["a"], [], 0.0),
    ],
)
def test_overlap_at_k(served: list[str], shadow: list[str], expected: float) -> None:
    assert overlap_at_k(served, shadow) == pytest.approx(expected)


def test_overlap_at_k_only_looks_at_the_top_k() -> None:
    served = [f"d{n}" for n in range(20)]
    shadow = [f"d{n}" for n in range(10)] + [f"x{n}" for n in range(10)]

    assert overlap_at_k(served, shadow, k=10) == 1.0
    assert overlap_at_k(served, shadow, k=20) == 0.5
