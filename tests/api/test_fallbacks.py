"""Fallbacks with engines really stopped: the tantivy index closed, a dedicated PostgreSQL shut down,
a lexical leg slower than its deadline. Nothing is patched: the app sees what production would see.

Each test builds its own app and engines (`build_engines`), so the session engines stay up. Responses
are never served from the cache here (`query_cache_ttl_secs=0`): a fallback must be computed live.
"""

from __future__ import annotations

import asyncio
import uuid
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import pytest

from app.api.errors import unavailable_detail
from app.api.operator_routes import READINESS_CACHE_S
from app.engines.embedded_postgres import EmbeddedPostgres
from app.engines.migrate import run_migrations
from tests.api.conftest import api_settings, app_client, build_engines, wait_indexed

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from app.wiring.engines import Engines

DOCUMENTS: list[dict[str, Any]] = [
    {
        "id": "ingress",
        "source": "runbooks/ingress.md",
        "title": "Ingress timeouts",
        "text": "# Ingress timeouts\n\nThe ingress controller drops idle connections after 60 seconds; raise "
        "proxy-read-timeout on the ingress to keep long polls open.",
        "tags": ["networking"],
    },
    {
        "id": "vacuum",
        "source": "runbooks/vacuum.md",
        "title": "Autovacuum",
        "text": "# Autovacuum\n\nDead tuples pile up when autovacuum falls behind; lower the scale factor for "
        "update-heavy tables.",
        "tags": ["database"],
    },
]


@asynccontextmanager
async def running_app(
    database_url: str, folder: Path, embedder, **overrides: Any
) -> AsyncIterator[tuple[Any, Engines]]:
    """The app on its own engines over `database_url`, with `DOCUMENTS` ingested and lexically indexed."""
    async with build_engines(database_url=database_url, lexical_path=folder / "lexical", embedder=embedder) as built:
        settings = api_settings(folder, query_cache_ttl_secs=0, **overrides)
        async with app_client(built.app(settings)) as client:
            project = f"fb-{uuid.uuid4().hex[:8]}"
            response = await client.post(f"/v1/projects/{project}/documents", json={"documents": DOCUMENTS})
            assert response.status_code == 201, response.text
            for document in DOCUMENTS:
                await wait_indexed(client, project, document["id"])
            client.project = project  # type: ignore[attr-defined]
            yield client, built.engines


async def query(client, text: str = "ingress idle connections timeout", **params: str) -> Any:
    return await client.get("/memory/query", params={"query": text, "project": client.project, **params})


async def readiness_after_cache(client) -> Any:
    """/readyz once the cached answer from before the change has expired."""
    await asyncio.sleep(READINESS_CACHE_S + 0.1)
    return await client.get("/readyz")


@pytest.fixture
async def dedicated_postgres(tmp_path, embedder) -> AsyncIterator[tuple[EmbeddedPostgres, str]]:
    """A PostgreSQL of this test's own (so stopping it hurts nobody), migrated for the real model."""
    server = EmbeddedPostgres(tmp_path / "pg")
    url = await asyncio.to_thread(server.start)
    try:
        await asyncio.to_thread(run_migrations, url, embedding_dimensions=embedder.dimensions)
        yield server, url
    finally:
        server.stop()  # idempotent when the test stopped it already


async def test_closed_lexical_index_falls_back_to_semantic(api_postgres_url, embedder, tmp_path) -> None:
    async with running_app(api_postgres_url, tmp_path, embedder) as (client, engines):
        healthy = await query(client)
        ready_before = await client.get("/readyz")

        await engines.lexical.close()
        degraded = await query(client)
        lexical_only_request = await query(client, strategy="lexical")
        ready_after = await readiness_after_cache(client)
        live_after = await client.get("/healthz")

    assert healthy.json()["degraded"] is False
    assert ready_before.status_code == 200
    assert degraded.status_code == 200, degraded.text
    body = degraded.json()
    assert body["degraded"] is True
    assert body["degraded_reasons"] == ["lexical_unavailable"]
    assert body["results"][0]["document_id"] == "ingress"
    assert all(hit["lexical_score"] is None and hit["semantic_score"] is not None for hit in body["results"])
    assert body["metrics"]["lexical_results_count"] == 0
    # Asking for the lexical strategy alone still answers, from the semantic leg.
    assert lexical_only_request.status_code == 200
    assert lexical_only_request.json()["degraded_reasons"] == ["lexical_unavailable"]
    assert lexical_only_request.json()["results"][0]["document_id"] == "ingress"
    # Still ready, as degraded: every replica is as able to answer, and taking them all out would not help.
    assert ready_after.status_code == 200
    assert ready_after.json()["status"] == "degraded"
    assert ready_after.json()["checks"]["lexical"].startswith("down")
    assert live_after.status_code == 200


@pytest.mark.slow  # starts and kills a PostgreSQL of its own
async def test_stopped_postgres_falls_back_to_lexical_then_both_down_is_503(
    dedicated_postgres, embedder, tmp_path
) -> None:
    server, url = dedicated_postgres
    async with running_app(url, tmp_path, embedder) as (client, engines):
        healthy = await query(client)
        ready_before = await client.get("/readyz")

        await asyncio.to_thread(server.stop)
        vector_down = await query(client)
        semantic_only_request = await query(client, strategy="semantic")
        ready_vector_down = await readiness_after_cache(client)
        write_down = await client.post(
            f"/v1/projects/{client.project}/documents", json={"id": "later", "text": "# Later\n\nWritten later."}
        )

        await engines.lexical.close()
        both_down = await query(client)
        both_down_post = await client.post(
            "/v1/search", json={"query": "ingress timeout", "project": client.project, "strategy": "cascading"}
        )
        ready_both_down = await readiness_after_cache(client)
        live_after = await client.get("/healthz")

    assert healthy.json()["degraded"] is False
    assert ready_before.status_code == 200
    assert vector_down.status_code == 200, vector_down.text
    body = vector_down.json()
    assert body["degraded"] is True
    # The store that would check the lexical hits is the one that is down: they stand, unchecked, and say so.
    assert body["degraded_reasons"] == ["semantic_unavailable", "lexical_unconfirmed"]
    assert body["results"][0]["document_id"] == "ingress"
    assert all(hit["semantic_score"] is None and hit["lexical_score"] is not None for hit in body["results"])
    assert semantic_only_request.status_code == 200
    assert semantic_only_request.json()["degraded_reasons"] == ["semantic_unavailable", "lexical_unconfirmed"]
    assert semantic_only_request.json()["results"][0]["document_id"] == "ingress"
    assert write_down.status_code == 503, write_down.text
    # The driver's words (a socket path, an error class) go to the log, not to every caller.
    assert write_down.json()["detail"] == unavailable_detail(write_down.json()["engine"])
    assert ready_vector_down.status_code == 200
    assert ready_vector_down.json()["status"] == "degraded"
    assert ready_vector_down.json()["checks"]["vector"].startswith("down")
    assert ready_both_down.status_code == 503
    assert ready_both_down.json()["status"] == "not ready"
    for response in (both_down, both_down_post):
        assert response.status_code == 503, response.text
        assert response.headers["content-type"].startswith("application/problem+json")
        problem = response.json()
        assert problem["status"] == 503
        assert set(problem["reasons"]) == {"semantic_unavailable", "lexical_unavailable"}
    assert live_after.status_code == 200


async def test_slow_lexical_leg_times_out_to_semantic(api_postgres_url, embedder, tmp_path) -> None:
    # A real deadline miss: fuzzy matching of a few hundred distinct terms takes tantivy well over 1 ms.
    words = " ".join(f"ingress{number} timeout{number}" for number in range(100))
    assert len(words) <= 2000
    async with running_app(api_postgres_url, tmp_path, embedder, lexical_timeout_ms=1, lexical_fuzziness=True) as (
        client,
        _,
    ):
        response = await query(client, text=words, strategy="hybrid")

    assert response.status_code == 200, response.text
    body = response.json()
    assert body["degraded"] is True, body["metrics"]
    assert body["degraded_reasons"] == ["lexical_timeout"]
    assert body["metrics"]["lexical_results_count"] == 0
    assert body["results"]
    assert all(hit["lexical_score"] is None for hit in body["results"])
