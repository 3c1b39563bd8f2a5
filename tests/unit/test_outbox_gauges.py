"""The outbox gauges while the document store cannot be read: the backlog holds, the oldest age keeps growing."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import TYPE_CHECKING

from prometheus_client import REGISTRY

from app.domain.errors import EngineUnavailableError
from app.domain.models import OutboxStats
from app.wiring import services
from app.wiring.services import stats_while_unreadable

if TYPE_CHECKING:
    import pytest


class StoreThatGoesDown:
    """Answers `first` once, then refuses every read; `refusals` counts the refused reads."""

    def __init__(self, first: OutboxStats) -> None:
        self.first: OutboxStats | None = first
        self.refusals = 0
        self.refused = asyncio.Event()

    async def outbox_stats(self) -> OutboxStats:
        if self.first is not None:
            stats, self.first = self.first, None
            return stats
        self.refusals += 1
        if self.refusals >= 3:
            self.refused.set()
        raise EngineUnavailableError("connection refused", engine="postgres")


async def test_the_oldest_age_keeps_growing_while_postgres_is_down_with_a_backlog(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(services, "BACKLOG_REFRESH_S", 0.01)
    store = StoreThatGoesDown(OutboxStats(backlog=2, oldest_age_s=40.0))
    poller = asyncio.create_task(services._refresh_backlog_gauge(SimpleNamespace(store=store)))  # type: ignore[arg-type]
    try:
        await asyncio.wait_for(store.refused.wait(), timeout=30)
    finally:
        poller.cancel()
        await asyncio.gather(poller, return_exceptions=True)
    assert REGISTRY.get_sample_value("poimen_lexical_outbox_backlog") == 2
    # Three refreshes of 0.01 s each after the read: the alert's age moved on from the frozen 40 s.
    assert (REGISTRY.get_sample_value("poimen_lexical_outbox_oldest_age_seconds") or 0.0) > 40.0


def test_an_empty_outbox_stays_empty_and_ages_add_up() -> None:
    assert stats_while_unreadable(OutboxStats(backlog=0, oldest_age_s=0.0), 60.0) == OutboxStats(0, 0.0)
    assert stats_while_unreadable(OutboxStats(backlog=3, oldest_age_s=12.5), 60.0) == OutboxStats(3, 72.5)
    # A clock that went backwards never makes the outbox younger than it was read.
    assert stats_while_unreadable(OutboxStats(backlog=3, oldest_age_s=12.5), -1.0) == OutboxStats(3, 12.5)
