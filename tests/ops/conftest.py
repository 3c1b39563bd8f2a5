"""Ops-tier fixtures: the real app on the session engines, built per test with the settings it needs."""

from __future__ import annotations

import time
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import pytest
from prometheus_client import REGISTRY

from tests.api.conftest import (  # noqa: F401 - re-exported fixture
    api_postgres_url,
    api_settings,
    app_client,
    build_engines,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Iterable
    from pathlib import Path

    from litestar import Litestar
    from litestar.testing import AsyncTestClient
    from opentelemetry.sdk.trace import SpanProcessor

    from app.engines.embedder import ServingEmbedder
    from app.wiring.engines import Engines


class OpsApp:
    """Builds apps on the session PostgreSQL and model, each with its own tantivy folder and settings."""

    def __init__(self, database_url: str, embedder: ServingEmbedder, data_dir: Path) -> None:
        self.database_url = database_url
        self.embedder = embedder
        self.data_dir = data_dir
        self.engines: Engines | None = None
        self._count = 0

    @asynccontextmanager
    async def client(
        self,
        *,
        span_processors: Iterable[SpanProcessor] = (),
        query_cache_clock: Callable[[], float] = time.monotonic,
        **overrides: Any,
    ) -> AsyncIterator[AsyncTestClient[Litestar]]:
        """A running app (lifespan included) with `api_settings(**overrides)`; `self.engines` are its engines.

        `query_cache_clock` is the clock the query cache's TTL reads: a test that moves its own decides expiry.
        """
        # Routing off unless a test turns it on: the strategy a test expects is then the configured one.
        overrides.setdefault("query_optimization_enabled", False)
        self._count += 1
        folder = self.data_dir / f"app{self._count}"
        async with build_engines(
            database_url=self.database_url, lexical_path=folder / "lexical", embedder=self.embedder
        ) as built:
            self.engines = built.engines
            app = built.app(
                api_settings(folder, **overrides), span_processors=span_processors, query_cache_clock=query_cache_clock
            )
            async with app_client(app) as client:
                yield client


@pytest.fixture
def ops_app(api_postgres_url: str, embedder: ServingEmbedder, tmp_path: Path) -> OpsApp:  # noqa: F811 - the imported fixture
    """A factory of real apps for one test."""
    return OpsApp(api_postgres_url, embedder, tmp_path)


def sample(name: str, **labels: str) -> float:
    """The current value of one sample in the default registry (0 when it does not exist yet)."""
    return REGISTRY.get_sample_value(name, labels) or 0.0


def document(document_id: str, text: str, *, title: str = "Notes") -> dict[str, Any]:
    """A minimal markdown document for the ingest endpoint."""
    return {"id": document_id, "source": f"{document_id}.md", "title": title, "text": text}


CORPUS = (
    document("cache", "# Caching\n\nA TTL cache keeps query results for a while and drops them on writes."),
    document("kube", "# Kubernetes\n\nUse kubectl port-forward to reach a pod on port 8080 from a laptop."),
    document("pg", "# PostgreSQL\n\nVacuum reclaims storage taken by dead tuples after updates and deletes."),
)


async def wait_indexed(
    client: AsyncTestClient[Litestar], project: str, document_id: str, *, headers: dict[str, str] | None = None
) -> None:
    """Wait (at most 10 s) until the outbox has put the document into the lexical index."""
    import asyncio  # noqa: PLC0415
    import time  # noqa: PLC0415

    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline:
        response = await client.get(f"/v1/projects/{project}/documents/{document_id}", headers=headers or {})
        if response.status_code == 200 and response.json()["lexically_indexed"]:
            return
        await asyncio.sleep(0.05)
    msg = f"{document_id} not lexically indexed within 10 s"
    raise AssertionError(msg)
