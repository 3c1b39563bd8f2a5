"""Every route is guarded or explicitly public: a handler added without a guard fails here, not in production."""

from __future__ import annotations

from typing import TYPE_CHECKING

from litestar.handlers import HTTPRouteHandler

from app.api.app import create_app
from app.api.guards import GUARDS, PUBLIC_OPT_KEY
from app.config import Settings

if TYPE_CHECKING:
    from pathlib import Path

PUBLIC_PATHS = {"/healthz", "/readyz", "/metrics", "/console", "/console/{file_path:path}"}
"""Probes, the scrape endpoint and the console's static files (no data: its API calls carry the user's token);
Litestar's own OpenAPI routes (`/schema...`) are public too."""


def route_handlers(tmp_path: Path) -> list[tuple[str, HTTPRouteHandler]]:
    app = create_app(Settings(_env_file=None, poimen_data_dir=tmp_path))
    return [
        (route.path, handler)
        for route in app.routes
        for handler in getattr(route, "route_handlers", ())
        # Litestar's automatic OPTIONS handlers answer CORS preflights, which carry no token.
        if isinstance(handler, HTTPRouteHandler) and handler.http_methods != {"OPTIONS"}
    ]


def test_every_route_has_exactly_one_auth_guard_or_is_marked_public(tmp_path: Path) -> None:
    unguarded = []
    for path, handler in route_handlers(tmp_path):
        guards = [guard for guard in handler.resolve_guards() if getattr(guard, "func", guard) in GUARDS]
        public = bool(handler.opt.get(PUBLIC_OPT_KEY)) or path.startswith("/schema")
        if len(guards) + public != 1:
            unguarded.append(f"{path} {handler.handler_name}: {len(guards)} guards, public={public}")

    assert unguarded == []


def test_only_probes_metrics_the_console_page_and_the_api_document_are_public(tmp_path: Path) -> None:
    public_paths = {
        path
        for path, handler in route_handlers(tmp_path)
        if handler.opt.get(PUBLIC_OPT_KEY) and not path.startswith("/schema")
    }

    assert public_paths == PUBLIC_PATHS
