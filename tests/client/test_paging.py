"""`iter_documents` and `iter_projects`: every item of a listing, page after page, on a scripted server."""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlsplit

from poimen_client.clients import AsyncPoimenClient, PoimenClient
from poimen_client.models import DocumentFilter

if TYPE_CHECKING:
    from tests.client.scripted_server import ScriptedServer


def summary(document_id: str) -> dict[str, object]:
    times = "2026-01-02T03:04:05Z"
    return {
        "id": document_id, "title": "", "source": document_id, "tags": [], "event_time": None, "chunks": 1,
        "version": 1, "lexically_indexed": True, "created_at": times, "updated_at": times,
    }  # fmt: skip


DOCUMENT_PAGES = [
    (200, {}, {"project": "p", "items": [summary("a"), summary("b")], "next_cursor": "c1"}),
    (200, {}, {"project": "p", "items": [summary("c"), summary("d")], "next_cursor": "c2"}),
    (200, {}, {"project": "p", "items": [summary("e")], "next_cursor": None}),
]


def sent_queries(server: ScriptedServer) -> list[dict[str, list[str]]]:
    return [parse_qs(urlsplit(arrival.path).query) for arrival in server.arrivals]


def test_iter_documents_follows_next_cursor_until_it_is_none_keeping_the_filter(server: ScriptedServer) -> None:
    server.script = DOCUMENT_PAGES

    with PoimenClient(server.url) as client:
        ids = [item.id for item in client.iter_documents("p", where=DocumentFilter(tag="ops"), page_size=2)]

    assert ids == ["a", "b", "c", "d", "e"]
    assert sent_queries(server) == [
        {"limit": ["2"], "tag": ["ops"]},
        {"limit": ["2"], "tag": ["ops"], "cursor": ["c1"]},
        {"limit": ["2"], "tag": ["ops"], "cursor": ["c2"]},
    ]


def test_iter_documents_asks_for_no_page_past_what_the_caller_reads(server: ScriptedServer) -> None:
    server.script = DOCUMENT_PAGES

    with PoimenClient(server.url) as client:
        first = next(client.iter_documents("p", page_size=2))

    assert first.id == "a"
    assert len(server.arrivals) == 1


def test_iter_projects_reads_every_page(server: ScriptedServer) -> None:
    server.script = [
        (200, {}, {"items": [{"project": "x"}], "next_cursor": "n"}),
        (200, {}, {"items": [{"project": "y"}], "next_cursor": None}),
    ]

    with PoimenClient(server.url) as client:
        projects = [item.project for item in client.iter_projects(page_size=1)]

    assert projects == ["x", "y"]
    assert sent_queries(server)[1] == {"limit": ["1"], "cursor": ["n"]}


async def test_the_async_client_iterates_pages_with_async_for(server: ScriptedServer) -> None:
    server.script = [*DOCUMENT_PAGES, (200, {}, {"items": [{"project": "x"}], "next_cursor": None})]

    async with AsyncPoimenClient(server.url) as client:
        ids = [item.id async for item in client.iter_documents("p", page_size=2)]
        projects = [item.project async for item in client.iter_projects()]

    assert ids == ["a", "b", "c", "d", "e"]
    assert projects == ["x"]
    assert len(server.arrivals) == 4
