"""What a project id may be: the one rule the API, the CLI, ingestion and import apply alike."""

from __future__ import annotations

import re
from typing import Final

PROJECT_ID_PATTERN: Final = r"^[A-Za-z0-9._-]{1,64}$"
"""1-64 letters, digits, `.`, `_` or `-`: a project id names folders, metrics and cache keys."""
PROJECT_ID_RULE: Final = "1-64 letters, digits, '.', '_' or '-'"


def is_project_id(text: str) -> bool:
    """Whether `text` is a project id the API can address (`PROJECT_ID_PATTERN`)."""
    return re.fullmatch(PROJECT_ID_PATTERN, text) is not None
