"""The exit statuses of `poimen` commands other than an interruption's (`app.cli.interrupts`)."""

from __future__ import annotations

from typing import Final

EXIT_FAILURE: Final = 1
"""The command failed: an engine that cannot be reached, a path it cannot use, a refused input."""
EXIT_CONFIGURATION: Final = 2
"""Bad arguments or settings: said before anything starts."""
