"""Every JSON body the API reads refuses a key given twice in one object, wherever it is, naming it and its path.

JSON leaves a repeated key's meaning open and the decoder kept the last: `{"query": "a", "query": "b"}`
searched for "b", and a second `tags` in `filters` silently replaced the first. One app on the real engines.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from tests.api.conftest import api_settings, app_client, build_engines

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from litestar import Litestar
    from litestar.testing import AsyncTestClient

    from app.engines.embedder import ServingEmbedder

JSON = {"content-type": "application/json"}


@pytest.fixture(scope="module")
async def client(
    api_postgres_url: str, embedder: ServingEmbedder, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[AsyncTestClient[Litestar]]:
    data_dir = tmp_path_factory.mktemp("json_body_keys")
    async with (
        build_engines(database_url=api_postgres_url, lexical_path=data_dir / "lexical", embedder=embedder) as built,
        app_client(built.app(api_settings(data_dir))) as test_client,
    ):
        yield test_client


def refusal(response: Any) -> dict[str, Any]:
    assert response.status_code == 400, response.text
    body: dict[str, Any] = response.json()
    return body


@pytest.mark.parametrize(
    ("body", "field"),
    [
        pytest.param('{"project": "P", "query": "a", "query": "b"}', "query", id="top-level"),
        pytest.param(
            '{"project": "P", "query": "a", "filters": {"tags": ["x"], "tags": []}}', "filters.tags", id="in-filters"
        ),
        pytest.param(
            '{"project": "P", "query": "a", "weights": {"semantic": 0.2, "lexical": 0.5, "semantic": 0.9}}',
            "weights.semantic",
            id="in-weights",
        ),
    ],
)
async def test_a_search_body_with_a_key_given_twice_is_a_400_naming_its_path(
    client: AsyncTestClient[Litestar], unique_name: str, body: str, field: str
) -> None:
    response = await client.post("/v1/search", content=body.replace("P", unique_name), headers=JSON)

    problem = refusal(response)
    assert problem["field"] == field
    assert problem["detail"] == (
        f"{field}: the key {field.rsplit('.', 1)[-1]!r} is given twice in one object; give it once"
    ).replace("'", '"')


async def test_a_batch_search_names_the_query_holding_the_repeated_key(
    client: AsyncTestClient[Litestar], unique_name: str
) -> None:
    body = (
        f'{{"project": "{unique_name}", "queries": [{{"query": "a"}},'
        ' {"query": "b", "filters": {"level": "L1", "level": "L2"}}]}'
    )

    response = await client.post("/v1/search/batch", content=body, headers=JSON)

    assert refusal(response)["field"] == "queries[1].filters.level"


async def test_a_document_with_a_key_given_twice_is_refused_and_nothing_is_written(
    client: AsyncTestClient[Litestar], unique_name: str
) -> None:
    documents = f"/v1/projects/{unique_name}/documents"
    twice_in_metadata = '{"id": "a", "text": "# A\\n\\nAlpha.", "metadata": {"owner": "ann", "owner": "bob"}}'
    twice_in_a_batch = '{"documents": [{"id": "b", "text": "Beta."}, {"id": "c", "text": "One.", "text": "Two."}]}'

    in_metadata = await client.post(documents, content=twice_in_metadata, headers=JSON)
    in_a_batch = await client.post(documents, content=twice_in_a_batch, headers=JSON)
    listed = await client.get(documents)

    assert refusal(in_metadata)["field"] == "metadata.owner"
    assert refusal(in_a_batch)["field"] == "documents[1].text"
    assert listed.json()["items"] == []


async def test_a_metadata_key_that_is_no_name_is_quoted_in_the_path(
    client: AsyncTestClient[Litestar], unique_name: str
) -> None:
    body = '{"id": "a", "text": "Alpha.", "metadata": {"a.b c": 1, "nested": [{"a.b c": 1, "a.b c": 2}]}}'

    response = await client.post(f"/v1/projects/{unique_name}/documents", content=body, headers=JSON)

    assert refusal(response)["field"] == 'metadata.nested[0]["a.b c"]'


async def test_keys_spelt_differently_but_equal_once_decoded_are_the_same_key(
    client: AsyncTestClient[Litestar], unique_name: str
) -> None:
    body = f'{{"project": "{unique_name}", "query": "a", "\\u0071uery": "b"}}'  # \u0071 is `q`

    response = await client.post("/v1/search", content=body, headers=JSON)

    assert refusal(response)["field"] == "query"


async def test_the_same_key_in_sibling_objects_is_not_a_repeat(
    client: AsyncTestClient[Litestar], unique_name: str
) -> None:
    body = (
        '{"documents": [{"id": "a", "text": "Alpha.", "metadata": {"k": {"k": 1}}},'
        ' {"id": "b", "text": "Beta.", "metadata": {"k": 2}}]}'
    )

    response = await client.post(f"/v1/projects/{unique_name}/documents", content=body, headers=JSON)

    assert response.status_code == 201, response.text
