"""The caller's bearer token, for engines that act with the caller's rights (`OPENSEARCH_AUTH=forward_jwt`).

Set per request by the HTTP layer after the token was verified; read by the OpenSearch adapter. A
context variable, so concurrent requests never see each other's token.
"""

from __future__ import annotations

from contextvars import ContextVar

forwarded_token: ContextVar[str | None] = ContextVar("forwarded_token", default=None)
"""The verified bearer token of the request being served, or None (auth off, or outside a request)."""
