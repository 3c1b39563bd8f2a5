from __future__ import annotations

from tests.api.conftest import wait_indexed


async def test_ingested_markdown_is_found_by_both_legs(api_client, unique_name) -> None:
    document = {
        "id": "runbook-1",
        "source": "runbooks/k8s/networking.md",
        "title": "Networking",
        "text": "# Kubernetes\n\nIntro text about clusters.\n\n## Port forwarding\n\nUse kubectl port-forward service/web 8080:80 to reach a pod.\n\n## Port conflicts\n\nIf port 8080 is taken, find the process with lsof -i :8080 and stop it.\n",
        "tags": ["networking"],
    }
    created = await api_client.post(f"/v1/projects/{unique_name}/documents", json=document)
    await wait_indexed(api_client, unique_name, "runbook-1")

    response = await api_client.get("/memory/query", params={"query": "port 8080 is taken", "project": unique_name})

    assert created.status_code == 201
    body = response.json()
    assert response.status_code == 200, body
    top = body["results"][0]
    assert top["breadcrumb"] == ["Networking", "Kubernetes", "Port conflicts"]
    assert top["score_breakdown"]["semantic_rank"] == 1
    assert top["score_breakdown"]["lexical_rank"] == 1
