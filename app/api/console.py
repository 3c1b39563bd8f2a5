"""The search console: a static page at `/console` (plain HTML/JS/CSS shipped in `console_static/`).

The page holds no data: it calls the API (`POST /v1/search` with `explain`, the document routes) with
the token the user pastes, so the files are public and every call it makes is guarded as usual.
`CONSOLE_ENABLED=false` leaves the route out.
"""

from __future__ import annotations

from pathlib import Path, PurePath
from typing import Final

from litestar import get
from litestar.datastructures import CacheControlHeader
from litestar.file_system import BaseLocalFileSystem
from litestar.params import FromPath
from litestar.response.file import ASGIFileResponse
from litestar.router import Router
from litestar.static_files import StaticFiles

from app.api.file_revalidation import FileRevalidation
from app.api.guards import public

CONSOLE_PATH: Final = "/console"
CONSOLE_DIRECTORY: Final = Path(__file__).parent / "console_static"
# Revalidate on every load: a redeploy must never leave a browser on an old script.
CONSOLE_CACHE_CONTROL: Final = CacheControlHeader(no_cache=True)


def console_router() -> Router:
    """`GET /console` (the page) and `/console/<file>` (its scripts and styles): public, revalidated per load.

    HEAD is answered as GET without the body, as on every route (`app.api.method_semantics`): Litestar's own
    static files router answered HEAD without a content-type. A revalidation that holds the file is a 304
    (`FileRevalidation`).
    """
    files = StaticFiles(
        is_html_mode=True,
        directories=[CONSOLE_DIRECTORY],
        file_system=BaseLocalFileSystem(),
        headers={CONSOLE_CACHE_CONTROL.HEADER_NAME: CONSOLE_CACHE_CONTROL.to_header()},
    )

    @get("/", name="console/index")
    async def get_index() -> ASGIFileResponse:
        return await files.handle(path="/", is_head_response=False)

    @get("/{file_path:path}", name="console")
    async def get_file(file_path: FromPath[PurePath]) -> ASGIFileResponse:
        return await files.handle(path=file_path.as_posix(), is_head_response=False)

    return Router(
        path=CONSOLE_PATH,
        route_handlers=[get_index, get_file],
        opt=dict(public),
        cache_control=CONSOLE_CACHE_CONTROL,
        middleware=[FileRevalidation],
        include_in_schema=False,
        tags=["console"],
    )
