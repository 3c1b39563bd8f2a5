"""The search console: a static page at `/console` (plain HTML/JS/CSS shipped in `console_static/`).

The page holds no data: it calls the API (`POST /v1/search` with `explain`, the document routes) with
the token the user pastes, so the files are public and every call it makes is guarded as usual.
`CONSOLE_ENABLED=false` leaves the route out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from litestar import head
from litestar.datastructures import CacheControlHeader
from litestar.file_system import BaseLocalFileSystem
from litestar.response.file import ASGIFileResponse
from litestar.router import Router
from litestar.static_files import StaticFiles, create_static_files_router

from app.api.guards import public

CONSOLE_PATH: Final = "/console"
CONSOLE_DIRECTORY: Final = Path(__file__).parent / "console_static"
# Revalidate on every load: a redeploy must never leave a browser on an old script.
CONSOLE_CACHE_CONTROL: Final = CacheControlHeader(no_cache=True)


def console_router() -> Router:
    """`GET`/`HEAD /console` (the page) and `/console/<file>` (its scripts and styles): public, revalidated per load."""
    router = create_static_files_router(
        path=CONSOLE_PATH,
        directories=[CONSOLE_DIRECTORY],
        html_mode=True,
        name="console",
        opt=dict(public),
        cache_control=CONSOLE_CACHE_CONTROL,
        include_in_schema=False,
        tags=["console"],
    )
    # Litestar's html_mode gives the page itself a GET handler only, so a link checker's or a probe's
    # HEAD /console was a 405; this answers it from the same file with the same headers and no body.
    index = StaticFiles(
        is_html_mode=True,
        directories=[CONSOLE_DIRECTORY],
        file_system=BaseLocalFileSystem(),
        headers={CONSOLE_CACHE_CONTROL.HEADER_NAME: CONSOLE_CACHE_CONTROL.to_header()},
    )

    @head("/", name="console/index-head")
    async def head_index() -> ASGIFileResponse:
        response = await index.handle(path="/", is_head_response=True)
        # Litestar drops the type from every HEAD answer; RFC 9110 (9.3.2) asks for GET's header fields.
        response.headers["content-type"] = "text/html; charset=utf-8"
        return response

    router.register(head_index)
    return router
