"""What `/readyz` answers from its checks: it fails only when no search could be answered."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from litestar.datastructures import State

from app.api.operator_routes import READINESS_CACHE_S, cached_readiness, engine_checks, readiness_status
from app.domain.errors import EngineUnavailableError

UP = {"model": "ok", "vector": "ok", "store": "ok", "lexical": "ok"}


@pytest.mark.parametrize(
    ("down", "status"),
    [
        ((), "ready"),
        (("lexical",), "degraded"),  # searches answer from the semantic leg
        (("vector", "store"), "degraded"),  # PostgreSQL down: searches answer from the lexical leg
        (("store",), "degraded"),
        (("vector", "store", "lexical"), "not ready"),  # nothing could answer
        (("model",), "not ready"),
        (("model", "lexical"), "not ready"),
    ],
)
def test_readiness_fails_only_when_no_search_leg_could_answer(down: tuple[str, ...], status: str) -> None:
    checks = {name: "down: EngineUnavailableError" if name in down else value for name, value in UP.items()}

    assert readiness_status(checks) == status


async def test_the_engines_are_checked_at_once_within_one_timeout() -> None:
    store_asked = asyncio.Event()

    async def vector() -> None:  # answers once the store has been asked: one after another, it timed out
        await store_asked.wait()

    async def store() -> None:
        store_asked.set()

    async def lexical() -> None:
        raise EngineUnavailableError("refused", engine="lexical")

    checks = await engine_checks({"vector": vector, "store": store, "lexical": lexical})

    assert checks == {"vector": "ok", "store": "ok", "lexical": "down: EngineUnavailableError"}


async def test_readiness_checks_the_engines_once_per_cache_period_and_again_after_it() -> None:
    state = State()
    checked_at: list[float] = []

    def at(now_s: float):  # a check that says when it ran
        async def check() -> dict[str, Any]:
            checked_at.append(now_s)
            return {"status": "ready", "checked": len(checked_at)}

        return check

    answers = [
        await cached_readiness(state, at(now_s), now_s=now_s)
        for now_s in (
            100.0,
            100.0 + READINESS_CACHE_S / 2,
            100.0 + READINESS_CACHE_S * 0.999,  # still the first answer
            100.0 + READINESS_CACHE_S,  # its time to live is over: checked again
            100.0 + READINESS_CACHE_S * 1.5,
            100.0 + READINESS_CACHE_S * 3,
        )
    ]

    assert checked_at == [100.0, 100.0 + READINESS_CACHE_S, 100.0 + READINESS_CACHE_S * 3]
    assert [answer["checked"] for answer in answers] == [1, 1, 1, 2, 2, 3]
