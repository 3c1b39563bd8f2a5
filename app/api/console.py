"""The search console: a static page at `/console` (plain HTML/JS/CSS shipped in `console_static/`).

The page holds no data: it calls the API (`POST /v1/search` with `explain`, the document routes) with
the token the user pastes, so the files are public and every call it makes is guarded as usual.
`CONSOLE_ENABLED=false` leaves the route out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from litestar.datastructures import CacheControlHeader
from litestar.router import Router
from litestar.static_files import create_static_files_router

from app.api.guards import public

CONSOLE_PATH: Final = "/console"
CONSOLE_DIRECTORY: Final = Path(__file__).parent / "console_static"


def console_router() -> Router:
    """`GET /console` (the page) and `GET /console/<file>` (its scripts and styles): public, revalidated per load."""
    return create_static_files_router(
        path=CONSOLE_PATH,
        directories=[CONSOLE_DIRECTORY],
        html_mode=True,
        name="console",
        opt=dict(public),
        # Revalidate on every load: a redeploy must never leave a browser on an old script.
        cache_control=CacheControlHeader(no_cache=True),
        include_in_schema=False,
        tags=["console"],
    )
