"""scripts/tune_awareness.py re-orders cached hits as the service would: the service's reading of the query."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from app.domain.reordering import EvidencePreferences
from tests.unit.test_memory_awareness import MAY_8, hit

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
sys.path.insert(0, str(SCRIPTS))  # the scripts import each other by module name, as `python scripts/x.py` does
tune_awareness = importlib.import_module("tune_awareness")


@pytest.mark.parametrize(
    ("query", "order"),
    [
        # A count back the service reads as a range names the time: no preference for dated turns.
        ("what did we talk about 3 days ago", ["undated", "dated"]),
        # An "ago" that is no date asks *when*: the turn carrying a date rises, as in the service.
        ("how long ago did Caroline move", ["dated", "undated"]),
    ],
)
def test_the_date_boost_follows_the_services_reading_of_ago(query: str, order: list[str]) -> None:
    hits = [hit("undated", 2.0, text="we talked about the move"), hit("dated", 1.5, text="I moved 4 years ago")]
    cached = tune_awareness.CachedQuery(query, MAY_8, None, hits)
    reorder = tune_awareness.variant(EvidencePreferences(date_boost=1.5))

    reordered = reorder(cached)

    assert [reordered_hit.chunk_id for reordered_hit in reordered] == order
