"""How long a claimed lexical outbox entry stays with its claimer: one default for every store and `Settings`.

A worker that claims an entry holds it this long; another worker, in any process, may take it only once the
lease runs out (its claimer crashed or hung). `OUTBOX_LEASE_S` overrides it (`app/config.py`).
"""

from __future__ import annotations

from typing import Final

DEFAULT_OUTBOX_LEASE_S: Final = 60.0
"""Seconds a claimed outbox entry stays with its claimer before another worker may take it."""
