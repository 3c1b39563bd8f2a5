"""What a project id may be: the one rule the API, the CLI, ingestion and import apply alike."""

from __future__ import annotations

import re
from typing import Final

PROJECT_ID_PATTERN: Final = (
    r"^(?:[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}|\.[A-Za-z0-9_-][A-Za-z0-9._-]{0,62}|\.\.[A-Za-z0-9._-]{1,62})$(?!\n)"
)
"""1-64 letters, digits, `.`, `_` or `-`, but not `.` or `..`: a project id names folders, metrics and cache
keys, and is a part of every URL of the project, and URLs resolve those two (`/v1/projects/../documents`
is `/v1/documents`), so such a project could be written through a percent-encoded path and never read
again. Spelt without a lookahead, so that every OpenAPI tool and test generator reads it."""
PROJECT_ID_RULE: Final = "1-64 letters, digits, '.', '_' or '-', and not '.' or '..'"


def is_project_id(text: str) -> bool:
    """Whether `text` is a project id the API can address (`PROJECT_ID_PATTERN`)."""
    return re.fullmatch(PROJECT_ID_PATTERN, text) is not None
