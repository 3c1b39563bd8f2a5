"""What `/readyz` answers from its checks: it fails only when no search could be answered."""

from __future__ import annotations

import pytest

from app.api.operator_routes import readiness_status

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
