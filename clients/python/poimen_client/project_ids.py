"""What a project id may be, as the service's rule has it: checked before a request is sent.

The service refuses any other id, but not always in words: in a path, a `/` (sent as `%2F`) or a
character outside the rule reached no route and came back as a 404 that read like a missing document.
`tests/client/test_openapi_conformance.py` fails if the service's pattern moves away from this copy.
"""

from __future__ import annotations

import re
from typing import Final

PROJECT_ID_PATTERN: Final = (
    r"^(?:[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}|\.[A-Za-z0-9_-][A-Za-z0-9._-]{0,62}|\.\.[A-Za-z0-9._-]{1,62})$(?!\n)"
)
"""The pattern of the service's OpenAPI document for every `project`; spelt as the service spells it."""
PROJECT_ID_RULE: Final = "1-64 letters, digits, '.', '_' or '-', and not '.' or '..'"
_SHOWN_CHARS: Final = 80
"""How much of a refused id a message quotes: enough to recognise it, not a whole pasted document."""


def checked_project_id(project: object) -> str:
    """`project` when the service can address it.

    Raises:
        TypeError: `project` is not a string.
        ValueError: `project` breaks the rule; the message quotes it and states the rule.
    """
    if not isinstance(project, str):
        msg = f"project must be a str, got {type(project).__name__}"
        raise TypeError(msg)
    if re.fullmatch(PROJECT_ID_PATTERN, project) is None:
        shown = project if len(project) <= _SHOWN_CHARS else f"{project[:_SHOWN_CHARS]}..."
        msg = f"project {shown!r} is not a project id the service accepts: {PROJECT_ID_RULE}"
        raise ValueError(msg)
    return project
