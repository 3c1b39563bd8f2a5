"""A project's common names (speakers the semantic query leaves out) follow its writes, on every replica.

They were kept five minutes per replica whatever was written: the tenth turn of a new speaker left her name in
the semantic query until then, on the replica that took the write and on the others. They are now kept under
the project's generation, which a write moves on in PostgreSQL before it is answered. A search's speakers
are the `s` of its cursor (what a later page plans with).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from app.api.cursors import decode_cursor
from tests.api.conftest import api_settings, app_client, build_engines

if TYPE_CHECKING:
    from pathlib import Path

    from litestar.testing import AsyncTestClient

    from app.engines.embedder import ServingEmbedder


def turn(number: int, speaker: str) -> dict[str, str]:
    return {"id": f"{speaker}-{number}", "title": f"2 pm on {number} June, 2023 | {speaker}", "text": f"Chat {number}."}


async def speakers(client: AsyncTestClient[Any], project: str) -> list[str]:
    body = {"query": "What did Gina paint?", "project": project, "limit": 1, "offset": 0}
    response = await client.post("/v1/search", json=body)
    assert response.status_code == 200, response.text
    return list(decode_cursor(response.json()["next_cursor"], kind="search")["s"])


async def test_a_write_on_another_replica_changes_the_speakers_of_the_next_search(
    api_client: AsyncTestClient[Any], api_postgres_url: str, embedder: ServingEmbedder, tmp_path: Path
) -> None:
    project = "common-names-follow-writes"
    turns = [turn(number, speaker) for number in range(10) for speaker in ("Caroline", "Melanie")]
    turns += [turn(number, "Gina") for number in range(9)]
    assert (await api_client.post(f"/v1/projects/{project}/documents", json={"documents": turns})).status_code == 201
    before = await speakers(api_client, project)  # this replica reads the titles: 9 of Gina's, too few
    data_dir = tmp_path / "other-replica"
    async with (
        build_engines(database_url=api_postgres_url, lexical_path=data_dir / "lexical", embedder=embedder) as built,
        app_client(built.app(api_settings(data_dir))) as other_replica,
    ):
        written = await other_replica.post(f"/v1/projects/{project}/documents", json=turn(9, "Gina"))
        after_write = await speakers(api_client, project)
        deleted = await other_replica.delete(f"/v1/projects/{project}/documents/Gina-9")
        after_delete = await speakers(api_client, project)
        written_here = await api_client.post(f"/v1/projects/{project}/documents", json=turn(9, "Gina"))
        after_write_here = await speakers(api_client, project)

    assert (written.status_code, deleted.status_code, written_here.status_code) == (201, 204, 201)
    assert (before, after_write, after_delete, after_write_here) == ([], ["gina"], [], ["gina"])
    assert (await api_client.delete(f"/v1/projects/{project}")).status_code == 200


async def test_speakers_named_may_and_april_are_the_names_of_a_search_not_its_dates(
    api_client: AsyncTestClient[Any],
) -> None:
    # "May" was never a name and "April" was read as the month: no speaker, an April filter and no boost.
    project = "speakers-named-like-months"
    turns = [turn(number, speaker) for number in range(10) for speaker in ("May", "April")]
    turns.append({"id": "trip", "title": "2 pm on 11 June, 2023 | April", "text": "May, the trip to Rome was great."})
    assert (await api_client.post(f"/v1/projects/{project}/documents", json={"documents": turns})).status_code == 201
    query = "What did April tell May about the trip?"
    body = {"query": query, "project": project, "limit": 3, "offset": 0, "explain": True}

    response = await api_client.post("/v1/search", json=body)

    assert response.status_code == 200, response.text
    found = response.json()
    analysis = found["query_analysis"]
    assert (analysis["entities"]["names"], analysis["entities"]["months"]) == (["april", "may"], [])
    assert analysis["event_time_from"] is None
    assert decode_cursor(found["next_cursor"], kind="search")["s"] == ["april", "may"]
    assert found["results"][0]["id"] == "trip#0"
    assert "entity" in found["results"][0]["score_breakdown"]["fusion"]["boosts"]
    assert (await api_client.delete(f"/v1/projects/{project}")).status_code == 200
