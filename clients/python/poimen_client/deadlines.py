"""A whole-call deadline: the time one call may take, its retries, their waits and each send's timeouts included.

`timeout_s` bounds each phase of one send (connecting, each write, each read); retries add their waits on
top, so a call could take `max_attempts` times as long and more. A `Deadline` is started when a call starts
and asked before every send and every wait: a send gets at most the time left for each phase, and a wait
that would end past the deadline is not begun.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Deadline:
    """The `time.monotonic()` instant by which a call must have its answer, and the `deadline_s` it came from."""

    deadline_s: float
    at_s: float

    @classmethod
    def start(cls, deadline_s: float | None) -> Deadline | None:
        """A deadline `deadline_s` seconds from now; None for a call without one."""
        return None if deadline_s is None else cls(deadline_s, time.monotonic() + deadline_s)

    def remaining_s(self) -> float:
        """Seconds left before the deadline; zero or less once it has passed."""
        return self.at_s - time.monotonic()


def checked_deadline_s(deadline_s: object) -> float | None:
    """`deadline_s` if it is None or a positive, finite number of seconds; else a `ValueError`."""
    if deadline_s is None:
        return None
    if isinstance(deadline_s, bool) or not isinstance(deadline_s, int | float) or not 0 < deadline_s < math.inf:
        msg = f"deadline_s must be None or a positive, finite number of seconds, got {deadline_s!r}"
        raise ValueError(msg)
    return float(deadline_s)
