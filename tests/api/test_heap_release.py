"""A large request body is followed by `malloc_trim`, so a replica's RSS does not stay at the request's peak.

The trim itself is glibc's (real below); what the app decides is when to call it, counted with a spy.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING

import pytest

from app.api import heap_release

if TYPE_CHECKING:
    from litestar import Litestar
    from litestar.testing import AsyncTestClient


class TrimSpy:
    def __init__(self) -> None:
        self.pads: list[int] = []

    def __call__(self, pad: int) -> int:
        self.pads.append(pad)
        return 1


@pytest.fixture
def trim_spy(monkeypatch: pytest.MonkeyPatch) -> TrimSpy:
    spy = TrimSpy()
    monkeypatch.setattr(heap_release, "malloc_trim", lambda: spy)
    return spy


def test_glibc_trim_is_found_and_runs() -> None:
    trim = heap_release.malloc_trim()
    assert trim is not None  # this suite runs on glibc (Debian), as the image does
    assert trim(0) in {0, 1}


async def test_trims_running_together_are_one_and_one_more(trim_spy: TrimSpy) -> None:
    trimmer = heap_release.HeapTrimmer()

    await asyncio.gather(*(trimmer.release(heap_release.TRIM_AFTER_BODY_BYTES) for _ in range(16)))
    await trimmer.release(heap_release.TRIM_AFTER_BODY_BYTES - 1)

    assert trim_spy.pads == [0, 0]  # the first, and one for all that ended while it ran


async def test_only_a_large_body_is_followed_by_a_trim(trim_spy: TrimSpy) -> None:
    await heap_release.release_free_heap(heap_release.TRIM_AFTER_BODY_BYTES - 1)
    assert trim_spy.pads == []
    await heap_release.release_free_heap(heap_release.TRIM_AFTER_BODY_BYTES)
    assert trim_spy.pads == [0]


async def test_no_trim_without_glibc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(heap_release, "malloc_trim", lambda: None)
    await heap_release.release_free_heap(heap_release.TRIM_AFTER_BODY_BYTES)  # nothing to call, no error


async def test_an_ingest_of_a_large_body_trims_once_after_it(
    api_client: AsyncTestClient[Litestar], trim_spy: TrimSpy
) -> None:
    document = {"id": "small", "title": "Heap", "text": "A short note about arenas."}
    small = await api_client.post("/v1/projects/heap/documents", json=document)
    assert small.status_code == 201, small.text
    assert trim_spy.pads == []

    # The same kind of document in a body made large by JSON whitespace: the size is what counts.
    body = json.dumps({"documents": [{**document, "id": "large"}]}).encode()
    body += b" " * (heap_release.TRIM_AFTER_BODY_BYTES - len(body))
    large = await api_client.post(
        "/v1/projects/heap/documents", content=body, headers={"content-type": "application/json"}
    )
    assert large.status_code == 201, large.text
    assert large.json()["documents"][0]["status"] == "created"
    assert trim_spy.pads == [0]

    rejected = await api_client.post(
        "/v1/projects/heap/documents", content=b"{" + b" " * len(body), headers={"content-type": "application/json"}
    )
    assert rejected.status_code == 400
    assert trim_spy.pads == [0, 0]  # a refused large body too: reading it left the heap as large


async def test_a_large_search_body_is_followed_by_a_trim_whatever_its_answer(
    api_client: AsyncTestClient[Litestar], trim_spy: TrimSpy
) -> None:
    # 16 searches of 50 MB refused 400 (query too long) left the server 391 MiB over its start until a trim.
    body = json.dumps({"query": "heap arenas", "project": "heap"}).encode()
    padded = body + b" " * (heap_release.TRIM_AFTER_BODY_BYTES - len(body))
    too_long = json.dumps({"query": "q" * heap_release.TRIM_AFTER_BODY_BYTES, "project": "heap"}).encode()

    small = await api_client.post("/v1/search", content=body, headers={"content-type": "application/json"})
    large = await api_client.post("/v1/search", content=padded, headers={"content-type": "application/json"})
    refused = await api_client.post("/v1/search", content=too_long, headers={"content-type": "application/json"})

    assert (small.status_code, large.status_code, refused.status_code) == (200, 200, 400)
    assert trim_spy.pads == [0, 0]  # after the large one and the refused one, not after the small one
