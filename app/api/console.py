"""The search console: a static page at `/console` (plain HTML/JS/CSS shipped in `console_static/`).

The page holds no data: it calls the API (`POST /v1/search` with `explain`, the document routes) with
the token the user pastes, so the files are public and every call it makes is guarded as usual.
`CONSOLE_ENABLED=false` leaves the route out.
"""

from __future__ import annotations

from pathlib import Path, PurePath
from typing import Final

from litestar import get, head
from litestar.datastructures import CacheControlHeader
from litestar.file_system import BaseLocalFileSystem
from litestar.params import FromPath
from litestar.response.file import ASGIFileResponse
from litestar.router import Router
from litestar.static_files import StaticFiles

from app.api.guards import public

CONSOLE_PATH: Final = "/console"
CONSOLE_DIRECTORY: Final = Path(__file__).parent / "console_static"
# Revalidate on every load: a redeploy must never leave a browser on an old script.
CONSOLE_CACHE_CONTROL: Final = CacheControlHeader(no_cache=True)


def console_router() -> Router:
    """`GET`/`HEAD /console` (the page) and `/console/<file>` (its scripts and styles): public, revalidated per load.

    Litestar's own static files router gives the page a GET handler only (a link checker's or a probe's
    HEAD /console was a 405), and its HEAD answers carry no content-type: these handlers answer HEAD with
    every header GET's answer has (RFC 9110, 9.3.2) and no body.
    """
    files = StaticFiles(
        is_html_mode=True,
        directories=[CONSOLE_DIRECTORY],
        file_system=BaseLocalFileSystem(),
        headers={CONSOLE_CACHE_CONTROL.HEADER_NAME: CONSOLE_CACHE_CONTROL.to_header()},
    )

    async def answer(path: str, *, is_head: bool) -> ASGIFileResponse:
        # Built as GET's answer (a HEAD one is built without its content-type), then sent without the body.
        response = await files.handle(path=path, is_head_response=False)
        response.is_head_response = is_head
        return response

    @get("/", name="console/index")
    async def get_index() -> ASGIFileResponse:
        return await answer("/", is_head=False)

    @head("/", name="console/index-head")
    async def head_index() -> ASGIFileResponse:
        return await answer("/", is_head=True)

    @get("/{file_path:path}", name="console")
    async def get_file(file_path: FromPath[PurePath]) -> ASGIFileResponse:
        return await answer(file_path.as_posix(), is_head=False)

    @head("/{file_path:path}", name="console/head")
    async def head_file(file_path: FromPath[PurePath]) -> ASGIFileResponse:
        return await answer(file_path.as_posix(), is_head=True)

    return Router(
        path=CONSOLE_PATH,
        route_handlers=[get_index, head_index, get_file, head_file],
        opt=dict(public),
        cache_control=CONSOLE_CACHE_CONTROL,
        include_in_schema=False,
        tags=["console"],
    )
