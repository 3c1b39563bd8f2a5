"""A deployment vocabulary end to end: the real app started with `QUERY_VOCABULARY_PATH`, real engines.

The file names an abbreviation ("pmx") that only the vocabulary knows and a lowercase product name. A
lexical search for "pmx" finds the note that spells it out, and `explain` shows the expansion and the name.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from tests.api.conftest import api_settings, app_client, build_engines, wait_indexed

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

PROJECT = "vocabulary-notes"
VOCABULARY = {"abbreviations": {"pmx": "poimen memory index"}, "entities": ["blue harbor"]}
DOCUMENTS = [
    {"id": "index", "title": "Index", "text": "The poimen memory index is rebuilt every night from PostgreSQL."},
    {"id": "harbor", "title": "Blue Harbor", "text": "The blue harbor team ships the console."},
    {"id": "bread", "title": "Bread", "text": "Sourdough needs a starter fed every day."},
]


@pytest.fixture(scope="module")
async def client(api_postgres_url: str, embedder, tmp_path_factory) -> AsyncIterator[Any]:
    data_dir = tmp_path_factory.mktemp("vocabulary")
    path = data_dir / "vocabulary.json"
    path.write_text(json.dumps(VOCABULARY), encoding="utf-8")
    settings = api_settings(data_dir, query_vocabulary_path=path)
    async with (
        build_engines(database_url=api_postgres_url, lexical_path=data_dir / "lexical", embedder=embedder) as built,
        app_client(built.app(settings)) as test_client,
    ):
        response = await test_client.post(f"/v1/projects/{PROJECT}/documents", json={"documents": DOCUMENTS})
        assert response.status_code == 201, response.text
        for document in DOCUMENTS:
            await wait_indexed(test_client, PROJECT, document["id"])
        yield test_client


async def explain(client, query: str, **options: Any) -> dict[str, Any]:
    body = {"query": query, "project": PROJECT, "explain": True, **options}
    response = await client.post("/v1/search", json=body)
    assert response.status_code == 200, response.text
    return response.json()


async def test_an_abbreviation_from_the_file_expands_and_finds_what_it_stands_for(client) -> None:
    answer = await explain(client, "pmx", strategy="lexical")

    assert answer["query_analysis"]["entities"]["expansions"] == {"pmx": "poimen memory index"}
    assert [hit["id"].split("#")[0] for hit in answer["results"]] == ["index"]


async def test_the_bundled_table_still_expands_alongside_the_file(client) -> None:
    answer = await explain(client, "pmx on k8s", strategy="lexical")

    assert answer["query_analysis"]["entities"]["expansions"] == {"pmx": "poimen memory index", "k8s": "kubernetes"}


async def test_a_listed_lowercase_name_is_one_name_in_the_analysis(client) -> None:
    answer = await explain(client, "what does blue harbor ship")

    assert answer["query_analysis"]["entities"]["names"] == ["blue harbor"]
