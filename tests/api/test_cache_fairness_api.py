"""One project's many distinct searches do not evict another project's cached answers (the noisy neighbour)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tests.api.conftest import api_settings, app_client, build_engines, wait_indexed, with_backup_note

if TYPE_CHECKING:
    from pathlib import Path

    from litestar import Litestar
    from litestar.testing import AsyncTestClient

    from app.engines.embedder import ServingEmbedder

CACHE_ENTRIES = 8


async def search(client: AsyncTestClient[Litestar], project: str, query: str) -> dict[str, Any]:
    response = await client.post("/v1/search", json={"query": query, "project": project, "strategy": "lexical"})
    assert response.status_code == 200, response.text
    return response.json()


async def test_a_project_flooding_the_answer_cache_leaves_another_projects_answers(
    api_postgres_url: str, embedder: ServingEmbedder, tmp_path: Path
) -> None:
    settings = api_settings(tmp_path, query_cache_max_size=CACHE_ENTRIES)
    async with (
        build_engines(database_url=api_postgres_url, lexical_path=tmp_path / "lexical", embedder=embedder) as built,
        app_client(built.app(settings)) as client,
    ):
        for project in ("fair-alpha", "fair-beta"):
            await wait_indexed(await with_backup_note(client, project), project, "backup")
        beta_queries = ["nightly backups", "when do backups run"]
        first = [await search(client, "fair-beta", query) for query in beta_queries]

        for number in range(3 * CACHE_ENTRIES):
            await search(client, "fair-alpha", f"backups {number}")
        again = [await search(client, "fair-beta", query) for query in beta_queries]
        alpha_oldest = await search(client, "fair-alpha", "backups 0")

    assert [answer["cached"] for answer in first] == [False, False]
    assert [answer["cached"] for answer in again] == [True, True]
    assert alpha_oldest["cached"] is False  # alpha's own oldest answers made room
