from __future__ import annotations

import asyncio

import pytest

from app.ingestion.admission import Allowance, KeyedAllowances


async def test_a_share_waits_until_it_fits_and_smaller_ones_go_ahead() -> None:
    allowance = Allowance(10)
    order: list[str] = []
    release_big = asyncio.Event()

    async def hold(name: str, amount: int, until: asyncio.Event | None = None) -> None:
        async with allowance.take(amount):
            order.append(f"in {name}")
            if until is not None:
                await until.wait()
        order.append(f"out {name}")

    first = asyncio.create_task(hold("first", 8, release_big))
    await asyncio.sleep(0)
    waiting = asyncio.create_task(hold("waiting", 5))  # 8 + 5 > 10: waits
    small = asyncio.create_task(hold("small", 2))  # 8 + 2 fits: goes ahead
    await asyncio.sleep(0)
    assert order == ["in first", "in small", "out small"]
    assert allowance.taken == 8
    assert allowance.waiting == 1

    release_big.set()
    await asyncio.gather(first, waiting, small)

    assert order[3:] == ["out first", "in waiting", "out waiting"]
    assert allowance.taken == 0
    assert allowance.waiting == 0


async def test_a_share_over_the_limit_runs_alone() -> None:
    allowance = Allowance(10)
    async with allowance.take(25):
        assert allowance.taken == 25
    assert allowance.taken == 0


async def test_a_cancelled_waiter_takes_nothing_and_a_cancelled_holder_gives_its_share_back() -> None:
    allowance = Allowance(10)
    held = asyncio.Event()

    async def hold() -> None:
        async with allowance.take(10):
            held.set()
            await asyncio.Event().wait()

    holder = asyncio.create_task(hold())
    await held.wait()
    waiter = asyncio.create_task(hold())
    await asyncio.sleep(0)
    waiter.cancel()
    holder.cancel()
    await asyncio.gather(holder, waiter, return_exceptions=True)

    assert allowance.taken == 0


def test_a_limit_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        Allowance(0)


async def test_a_keys_second_share_waits_on_its_own_allowance_while_another_key_goes_ahead() -> None:
    per_key = KeyedAllowances(10)
    shared = Allowance(20)
    order: list[str] = []
    release = asyncio.Event()

    async def hold(key: str, amount: int, until: asyncio.Event | None = None) -> None:
        async with per_key.take(key, amount), shared.take(amount):
            order.append(f"in {key}")
            if until is not None:
                await until.wait()

    first = asyncio.create_task(hold("a", 10, release))
    await asyncio.sleep(0)
    second = asyncio.create_task(hold("a", 10, release))  # waits on "a", holding nothing of `shared`
    other = asyncio.create_task(hold("b", 10))
    await asyncio.sleep(0)
    assert order == ["in a", "in b"]
    assert shared.taken == 10
    assert len(per_key) == 1  # "b" held and gave back: its allowance is gone

    release.set()
    await asyncio.gather(first, second, other)

    assert order == ["in a", "in b", "in a"]
    assert len(per_key) == 0
