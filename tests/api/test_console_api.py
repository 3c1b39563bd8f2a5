"""The console's static files: served public at `/console`, absent with `CONSOLE_ENABLED=false`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.api.app import create_app
from app.api.console import CONSOLE_DIRECTORY, CONSOLE_PATH
from app.config import Settings

if TYPE_CHECKING:
    from pathlib import Path


async def test_console_page_is_html_with_a_self_only_content_policy(api_client) -> None:
    response = await api_client.get("/console")

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert response.headers["cache-control"] == "no-cache"
    assert "default-src 'none'" in response.text
    assert 'src="/console/console.js"' in response.text


async def test_the_console_may_not_be_framed_and_its_policy_is_a_header(api_client) -> None:
    # A <meta> policy cannot say frame-ancestors; the page is where a user pastes a token.
    response = await api_client.get("/console")

    policy = response.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in policy
    assert "script-src 'self'" in policy
    assert response.headers["x-frame-options"] == "DENY"
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["cache-control"] == "no-cache"  # the console's own, not the API's no-store


async def test_api_answers_are_never_stored_by_a_cache_nor_sniffed(api_client, unique_name) -> None:
    document = {"id": "d", "text": "A private note about the vault."}
    written = await api_client.post(f"/v1/projects/{unique_name}/documents", json=document)
    read = await api_client.get(f"/v1/projects/{unique_name}/documents/d")
    missing = await api_client.get("/v1/nowhere")

    for response in (written, read, missing):
        assert response.headers["cache-control"] == "no-store", response.request.url
        assert response.headers["x-content-type-options"] == "nosniff"
    assert read.headers["etag"]  # conditional requests are the client's own: they still work


async def test_console_scripts_and_styles_are_served_from_the_package(api_client) -> None:
    for name in ("console.js", "api.js", "render.js", "console.css"):
        response = await api_client.get(f"/console/{name}")

        assert response.status_code == 200, name
        assert response.text == (CONSOLE_DIRECTORY / name).read_text()


def test_console_page_loads_nothing_from_another_origin() -> None:
    for path in CONSOLE_DIRECTORY.iterdir():
        text = path.read_text()

        assert "http://" not in text, path.name
        assert "https://" not in text, path.name


async def test_an_unknown_console_file_is_a_problem_404(api_client) -> None:
    response = await api_client.get("/console/missing.js")

    assert response.status_code == 404
    assert response.headers["content-type"].startswith("application/problem+json")


def test_console_disabled_leaves_the_route_out(tmp_path: Path) -> None:
    app = create_app(Settings(_env_file=None, poimen_data_dir=tmp_path, console_enabled=False))

    assert not [route.path for route in app.routes if route.path.startswith(CONSOLE_PATH)]


async def test_head_on_the_console_page_answers_like_get_without_a_body(api_client) -> None:
    # Link checkers and uptime probes ask HEAD; the page once answered them 405.
    got = await api_client.get("/console")

    headed = await api_client.head("/console")

    assert headed.status_code == 200
    assert headed.content == b""
    assert headed.headers["content-type"] == got.headers["content-type"]
    assert headed.headers["content-length"] == got.headers["content-length"]
    assert headed.headers["cache-control"] == "no-cache"
    assert headed.headers["content-security-policy"] == got.headers["content-security-policy"]


async def test_head_on_each_console_file_answers_like_get_without_a_body(api_client) -> None:
    # Litestar's HEAD answer for a static file carried no content-type, unlike its GET's.
    for path in sorted(CONSOLE_DIRECTORY.iterdir()):
        got = await api_client.get(f"/console/{path.name}")

        headed = await api_client.head(f"/console/{path.name}")

        assert headed.status_code == 200, path.name
        assert headed.content == b"", path.name
        assert headed.headers.get("content-type") == got.headers["content-type"], path.name
        assert headed.headers["content-length"] == got.headers["content-length"] == str(path.stat().st_size)
        assert headed.headers["cache-control"] == "no-cache", path.name


async def test_revalidating_an_unchanged_console_file_is_a_304_without_the_body(api_client) -> None:
    # `Cache-Control: no-cache` has a browser revalidate each load; the tag it sent back got the whole file again.
    first = await api_client.get("/console/console.js")

    by_tag = await api_client.get("/console/console.js", headers={"If-None-Match": first.headers["etag"]})
    by_date = await api_client.get("/console/console.js", headers={"If-Modified-Since": first.headers["last-modified"]})
    page = await api_client.get(
        "/console", headers={"If-None-Match": (await api_client.get("/console")).headers["etag"]}
    )

    for response in (by_tag, by_date, page):
        assert response.status_code == 304
        assert response.content == b""
        assert response.headers["cache-control"] == "no-cache"
        assert "content-type" not in response.headers
    assert by_tag.headers["etag"] == first.headers["etag"]


async def test_a_console_file_revalidated_with_another_tag_or_an_older_date_is_sent_whole(api_client) -> None:
    first = await api_client.get("/console/console.js")

    other_tag = await api_client.get("/console/console.js", headers={"If-None-Match": '"another"'})
    older = await api_client.get("/console/console.js", headers={"If-Modified-Since": "Thu, 01 Jan 1970 00:00:00 GMT"})
    # If-None-Match decides when both are sent (RFC 9110, 13.2.2): a date alone would have said 304.
    both = await api_client.get(
        "/console/console.js",
        headers={"If-None-Match": '"another"', "If-Modified-Since": first.headers["last-modified"]},
    )

    assert [r.status_code for r in (other_tag, older, both)] == [200, 200, 200]
    assert other_tag.content == first.content
