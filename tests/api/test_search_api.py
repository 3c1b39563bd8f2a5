"""The search API's edges over HTTP: bad input is a 400 naming the field, odd text is searched as text,
routing (QUERY_OPTIMIZATION_ENABLED) picks the reference's strategies, and both legs apply the same filters.

One app per module with routing on, on the session PostgreSQL and model and its own tantivy folder.
"""

from __future__ import annotations

import unicodedata
import uuid
from typing import TYPE_CHECKING, Any

import pytest

from tests.api.conftest import api_settings, app_client, build_engines, wait_indexed

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

PROBLEM_JSON = "application/problem+json"

# Four documents in one project that differ in level, tags and event time, and one twin in another project.
FILTER_DOCUMENTS: list[dict[str, Any]] = [
    {
        "id": "net-2024",
        "source": "runbooks/net/ingress-2024.md",
        "title": "Ingress timeouts",
        "text": "# Ingress timeouts\n\nThe ingress controller drops idle connections after 60 seconds.\n\n"
        "## Raise the timeout\n\nSet the proxy-read-timeout annotation on the ingress to 300 seconds.",
        "tags": ["networking", "ingress"],
        "event_time": "2024-04-10T08:00:00Z",
    },
    {
        "id": "net-2023",
        "source": "runbooks/net/ingress-2023.md",
        "title": "Ingress timeouts in the old cluster",
        "text": "# Ingress timeouts in the old cluster\n\nThe old load balancer closed idle connections after "
        "30 seconds.\n\n## Workaround\n\nClients sent keep-alive pings every 20 seconds to hold the connection.",
        "tags": ["networking"],
        "event_time": "2023-02-01T08:00:00Z",
    },
    {
        "id": "db-timeouts",
        "source": "runbooks/db/statement-timeouts.md",
        "title": "Statement timeouts",
        "text": "# Statement timeouts\n\nLong queries are cancelled by statement_timeout after 30 seconds.\n\n"
        "## Raise the timeout\n\nSet statement_timeout per role for the reporting jobs only.",
        "tags": ["database"],
    },
    {
        "id": "notes",
        "source": "notes/timeouts.md",
        "title": "Timeout notes",
        "text": "A short note about connection timeouts, retries and back-off between services.",
        "tags": ["Networking", "notes"],  # capitalised: tag filters ignore case
    },
]
OTHER_PROJECT_DOCUMENT = {**FILTER_DOCUMENTS[0], "id": "elsewhere"}


@pytest.fixture(scope="module")
async def client(api_postgres_url, embedder, tmp_path_factory) -> AsyncIterator[Any]:
    """The app with full optimizer routing on (every strategy routable, as the reference's table has it)."""
    data_dir = tmp_path_factory.mktemp("search-api")
    async with build_engines(
        database_url=api_postgres_url, lexical_path=data_dir / "lexical", embedder=embedder
    ) as built:
        settings = api_settings(
            data_dir, query_optimization_enabled=True, query_routing_strategies="hybrid,semantic,lexical,cascading"
        )
        app = built.app(settings)
        async with app_client(app) as test_client:
            yield test_client


@pytest.fixture(scope="module")
async def project(client) -> str:
    """A project with `FILTER_DOCUMENTS`; the same first document also lives in a second project."""
    name = f"api-{uuid.uuid4().hex[:8]}"
    response = await client.post(f"/v1/projects/{name}/documents", json={"documents": FILTER_DOCUMENTS})
    assert response.status_code == 201, response.text
    other = await client.post(f"/v1/projects/{name}-other/documents", json=OTHER_PROJECT_DOCUMENT)
    assert other.status_code == 201, other.text
    for document in FILTER_DOCUMENTS:
        await wait_indexed(client, name, document["id"])
    await wait_indexed(client, f"{name}-other", "elsewhere")
    return name


def assert_problem(response, field: str) -> dict[str, Any]:
    """A 400 problem+json whose `field` (or `fields`) names `field`."""
    assert response.status_code == 400, response.text
    assert response.headers["content-type"].startswith(PROBLEM_JSON)
    body = response.json()
    assert body["status"] == 400
    assert body["title"]
    assert body["detail"]
    named = [body.get("field"), *body.get("fields", [])]
    assert any(name is not None and (name == field or name.startswith((f"{field}.", f"{field}["))) for name in named), (
        body
    )
    return body


# ------------------------------------------------------------------------------------------ bad input


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"query": "", "project": "p"}, "query"),
        ({"query": "   \t ", "project": "p"}, "query"),
        ({"query": "x" * 8001, "project": "p"}, "query"),
        ({"project": "p"}, "query"),
        ({"query": "ports"}, "project"),
        ({"query": "ports", "project": "bad/project"}, "project"),
        ({"query": "ports", "project": "x" * 65}, "project"),
        ({"query": "ports", "project": "p", "limit": "0"}, "limit"),
        ({"query": "ports", "project": "p", "limit": "101"}, "limit"),
        ({"query": "ports", "project": "p", "limit": "ten"}, "limit"),
        ({"query": "ports", "project": "p", "limit": "2.5"}, "limit"),
        ({"query": "ports", "project": "p", "strategy": "fastest"}, "strategy"),
        ({"query": "ports", "project": "p", "fusion": "borda"}, "fusion"),
    ],
    ids=[
        "empty-query", "blank-query", "long-query", "missing-query", "missing-project", "slash-project",
        "long-project", "limit-0", "limit-101", "limit-word", "limit-float", "strategy", "fusion",
    ],
)  # fmt: skip
async def test_get_rejects_bad_input_naming_the_field(client, params: dict[str, str], field: str) -> None:
    response = await client.get("/memory/query", params=params)

    assert_problem(response, field)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("strategy", "HYBRID"),
        ("strategy", "Lexical"),
        ("strategy", " hybrid "),
        ("strategy", ""),
        ("fusion", "RRF"),
        ("fusion", "zscore "),
        ("fusion", ""),
    ],
)
async def test_get_and_post_refuse_an_unlisted_enum_spelling_alike(client, field: str, value: str) -> None:
    # GET lowercased and stripped what POST refuses: `?strategy=HYBRID` searched, `"strategy": "HYBRID"` was a 400.
    got = await client.get("/memory/query", params={"query": "ingress", "project": "p", field: value})
    posted = await client.post("/v1/search", json={"query": "ingress", "project": "p", field: value})

    get_problem = assert_problem(got, field)
    post_problem = assert_problem(posted, field)
    assert get_problem["field"] == post_problem["field"] == field
    assert get_problem["detail"] == post_problem["detail"]
    allowed = "cascading, hybrid, lexical, semantic" if field == "strategy" else "rrf, weighted, zscore"
    assert get_problem["detail"] == f"{field}: must be one of {allowed} (as written, lowercase); got {value!r}"


def search_body(**overrides: Any) -> dict[str, Any]:
    return {"query": "ingress timeout", "project": "p", **overrides}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (search_body(query=""), "query"),
        (search_body(query="  \n "), "query"),
        (search_body(query="y" * 8001), "query"),
        (search_body(query="y" * 250_000), "query"),
        ({"project": "p"}, "query"),
        ({"query": "ports"}, "project"),
        (search_body(project="no spaces"), "project"),
        (search_body(project=""), "project"),
        (search_body(limit=0), "limit"),
        (search_body(limit=101), "limit"),
        (search_body(limit="five"), "limit"),
        (search_body(limit=2.5), "limit"),
        (search_body(strategy="fastest"), "strategy"),
        (search_body(fusion="borda"), "fusion"),
        (search_body(filters={"tags": "networking"}), "filters.tags"),
        (search_body(filters={"level": 3}), "filters.level"),
        (search_body(filters={"colour": "red"}), "filters"),
        (search_body(filters={"date_from": "yesterday"}), "filters.date_from"),
        (search_body(filters={"date_from": "2024-05-01T00:00:00Z", "date_to": "2024-05-01T00:00:00Z"}), "filters.date_from"),
        (search_body(filters={"date_from": "2024-06-01T00:00:00Z", "date_to": "2024-05-01T00:00:00Z"}), "filters.date_from"),
        (search_body(filters=["networking"]), "filters"),
        (search_body(filters={"tags": [""]}), "filters.tags[0]"),
        (search_body(filters={"tags": ["t" * 129]}), "filters.tags[0]"),
        (search_body(filters={"tags": [f"t{n}" for n in range(65)]}), "filters.tags"),
        (search_body(filters={"tags": ["net\u0000"]}), "filters.tags"),
        (search_body(filters={"source_prefix": "runbooks/\u0000"}), "filters.source_prefix"),
        (search_body(filters={"level": "h2"}), "filters.level"),
        (search_body(filters={"level": ["L1", "L7"]}), "filters.level[1]"),
        (search_body(filters={"level": "L\u0000"}), "filters.level"),
        (search_body(weights={"semantic": -1}), "weights.semantic"),
        (search_body(weights={"semantic": 0, "lexical": 0}), "weights.semantic"),
        (search_body(weights={"lexical": 1.5}), "weights.lexical"),
        (search_body(rrf_k=0), "rrf_k"),
        (search_body(collapse=0), "collapse"),
        (search_body(min_score=1.5), "min_score"),
        (search_body(min_score=-0.1), "min_score"),
        (search_body(unknown_option=True), "unknown_option"),
    ],
    ids=[
        "empty-query", "blank-query", "long-query", "far-too-long-query", "missing-query", "missing-project", "space-project",
        "empty-project", "limit-0", "limit-101", "limit-string", "limit-float", "strategy", "fusion",
        "tags-not-list", "level-not-string", "unknown-filter", "date-not-date", "empty-date-range",
        "inverted-date-range", "filters-not-object", "empty-tag", "long-tag", "too-many-tags", "nul-tag", "nul-source-prefix",
        "unknown-level", "unknown-level-in-list", "nul-level", "negative-weight", "zero-weights", "weight-alone-above-1", "rrf-k-0", "collapse-0", "min-score-above-1", "min-score-below-0", "unknown-key",
    ],
)  # fmt: skip
async def test_post_rejects_bad_input_naming_the_field(client, body: dict[str, Any], field: str) -> None:
    response = await client.post("/v1/search", json=body)

    assert_problem(response, field)


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        (b'{"query": "x", "project": ', "malformed JSON: Input data was truncated"),
        (
            b'{"query": "knee \\ud800", "project": "p"}',
            "malformed JSON: a \\uD800-\\uDBFF escape not followed by a \\uDC00-\\uDFFF one (a lone surrogate is no character)",
        ),
        (
            b'{"project": "p", "query": "knee \\ud800"}',
            "malformed JSON: a \\uD800-\\uDBFF escape not followed by a \\uDC00-\\uDFFF one (a lone surrogate is no character)",
        ),
        (b"", "the request body is empty: expected a JSON object"),
        (b"  \n", "the request body is empty: expected a JSON object"),
    ],
)
async def test_post_rejects_an_empty_or_malformed_body_naming_it(client, body: bytes, detail: str) -> None:
    response = await client.post("/v1/search", content=body, headers={"content-type": "application/json"})

    problem = assert_problem(response, "body")
    assert (problem["title"], problem["detail"]) == ("Invalid request", detail)


@pytest.mark.parametrize(
    ("path", "body", "field", "bound"),
    [
        ("/v1/search", {"query": "x", "project": "p", "filters": {"tags": [1] * 65}}, "filters.tags", 64),
        ("/v1/search", {"query": "x", "project": "p", "filters": {"level": [1] * 8}}, "filters.level", 7),
        (
            "/v1/search/batch",
            {"project": "p", "queries": [{"query": "x"}, {"query": "y", "filters": {"tags": [1] * 65}}]},
            "queries[1].filters.tags",  # the item: it said queries[*]
            64,
        ),
    ],
)
async def test_a_list_over_its_bound_is_refused_by_its_count_before_its_items_are_read(
    client, path: str, body: dict[str, Any], field: str, bound: int
) -> None:
    # Every item is invalid: read first (4,000,000 tags took 3 s and 235 MB), the first would be blamed.
    response = await client.post(path, json=body)

    problem = assert_problem(response, field)
    assert (problem["field"], problem["detail"]) == (field, f"{field}: must hold at most {bound} items")


async def test_framework_errors_are_titled_by_their_status(client) -> None:
    missing = await client.get("/v1/no-such-route")
    wrong_method = await client.put("/v1/search")

    assert (missing.status_code, missing.json()["title"]) == (404, "Not found")
    assert (wrong_method.status_code, wrong_method.json()["title"]) == (405, "Method not allowed")
    assert "POST" in wrong_method.headers["allow"]


async def test_post_rejects_a_body_that_is_not_an_object(client) -> None:
    response = await client.post("/v1/search", json=["ingress timeout"])

    assert response.status_code == 400, response.text
    assert response.headers["content-type"].startswith(PROBLEM_JSON)


# ------------------------------------------------------------------------------------------ odd queries


@pytest.mark.parametrize(
    "query",
    [
        "the of and",
        "?!...;",
        "🙂🙂",
        "timeouts 🙂",
        "'; DROP TABLE chunks; --",
        'SELECT * FROM chunks WHERE text LIKE "%timeout%"',
        '{"query": {"match_all": {}}}',
        "title:ingress AND (timeout OR",
        "time* ~2 ^3 [a TO b]",
        '"unbalanced quote',
        '""',
        "-",
        "NOT",
        "\\ / : ( ) * ~ ? + - ! { } [ ] ^",
        "ingress\x00timeout",
    ],
)
async def test_odd_queries_are_searched_as_text(client, project: str, query: str) -> None:
    get_response = await client.get("/memory/query", params={"query": query, "project": project})
    post_response = await client.post("/v1/search", json={"query": query, "project": project, "strategy": "hybrid"})

    assert get_response.status_code == 200, get_response.text
    assert post_response.status_code == 200, post_response.text
    assert post_response.json()["degraded"] is False
    assert get_response.json()["query"] == query


async def test_lucene_syntax_still_finds_the_words(client, project: str) -> None:
    response = await client.post(
        "/v1/search", json={"query": "statement_timeout:(reporting*", "project": project, "strategy": "lexical"}
    )

    assert response.status_code == 200, response.text
    assert response.json()["results"][0]["document_id"] == "db-timeouts"


# ------------------------------------------------------------------------------------------ routing


@pytest.mark.parametrize(
    ("query", "strategy", "question_type"),
    [
        ("#networking @devops", "Lexical", "navigational"),
        ("fix port 2024", "Cascading", "troubleshooting"),
        ("How do I deploy to K8s?", "Hybrid", "procedural"),
        ("ingress", "Hybrid", "open"),  # short, no syntax: hybrid (the reference's lexical route lost recall)
        ('"idle connections" ingress controller', "Lexical", "open"),
        ("where are the ingress timeout runbooks", "Cascading", "navigational"),
        ("why do idle connections get dropped", "Hybrid", "open"),
    ],
)
async def test_routing_follows_the_reference_table(
    client, project: str, query: str, strategy: str, question_type: str
) -> None:
    response = await client.get("/memory/query", params={"query": query, "project": project, "explain": "true"})

    assert response.status_code == 200, response.text
    body = response.json()
    assert body["search_strategy"] == strategy
    assert body["query_analysis"]["routed_strategy"] == strategy
    assert body["question_type"] == question_type
    assert 0 < body["strategy_confidence"] < 1


async def test_explicit_strategy_beats_routing(client, project: str) -> None:
    response = await client.get(
        "/memory/query", params={"query": "#networking @devops", "project": project, "strategy": "semantic"}
    )

    assert response.status_code == 200, response.text
    assert response.json()["search_strategy"] == "Semantic"
    assert response.json()["strategy_confidence"] == 1.0


# ------------------------------------------------------------------------------------------ fusion options


FUSION_OPTIONS: list[tuple[dict[str, Any], str]] = [
    ({"fusion": "rrf"}, "fusion"),
    ({"weights": {"semantic": 0.3}}, "weights.semantic"),
    ({"weights": {"lexical": 0.3}}, "weights.lexical"),
    ({"rrf_k": 30, "fusion": "rrf"}, "fusion"),
    ({"rrf_k": 30}, "rrf_k"),
]


@pytest.mark.parametrize("strategy", ["lexical", "semantic", "cascading"])
@pytest.mark.parametrize(("option", "field"), FUSION_OPTIONS, ids=[field for _, field in FUSION_OPTIONS])
async def test_a_strategy_that_fuses_nothing_refuses_fusion_options(
    client, project: str, strategy: str, option: dict[str, Any], field: str
) -> None:
    # Accepted and ignored before: cascading orders the lexical candidates by cosine, the others by one leg.
    response = await client.post(
        "/v1/search", json={"query": "ingress timeout", "project": project, "strategy": strategy, **option}
    )

    detail = assert_problem(response, field)["detail"]
    assert f"strategy {strategy}" in detail
    assert "hybrid" in detail


async def test_get_refuses_fusion_with_a_strategy_that_fuses_nothing(client, project: str) -> None:
    response = await client.get(
        "/memory/query", params={"query": "ingress", "project": project, "strategy": "lexical", "fusion": "rrf"}
    )

    assert "strategy lexical" in assert_problem(response, "fusion")["detail"]


async def test_a_batch_query_with_fusion_options_it_cannot_use_fails_the_batch_naming_it(client, project) -> None:
    queries = [{"query": "ingress"}, {"query": "ingress", "strategy": "semantic", "weights": {"lexical": 0.2}}]

    response = await client.post("/v1/search/batch", json={"project": project, "queries": queries})

    assert_problem(response, "queries[1].weights.lexical")


@pytest.mark.parametrize("fusion", ["zscore", "weighted"])
async def test_rrf_k_is_refused_by_a_fusion_asked_for_other_than_rrf(client, project: str, fusion: str) -> None:
    body: dict[str, Any] = {"query": "ingress timeout", "project": project, "strategy": "hybrid", "rrf_k": 5}

    refused = await client.post("/v1/search", json={**body, "fusion": fusion})
    answered = await client.post("/v1/search", json={**body, "fusion": "rrf"})

    assert fusion in assert_problem(refused, "rrf_k")["detail"]
    assert answered.status_code == 200, answered.text
    assert answered.json()["fusion_method"] == "rrf"


async def test_rrf_k_the_services_fusion_does_not_read_is_named_unused(client, project: str) -> None:
    # RANKING_ALGORITHM (zscore here) may differ per request under a flag: the request is answered, not refused.
    body = {"query": "ingress timeout", "project": project, "strategy": "hybrid", "rrf_k": 5, "explain": True}

    response = await client.post("/v1/search", json=body)

    assert response.status_code == 200, response.text
    assert response.json()["fusion_method"] == "zscore"
    assert response.json()["query_analysis"]["unused_options"] == ["rrf_k"]


async def test_fusion_options_routing_leaves_unused_are_named_in_the_explain(client, project: str) -> None:
    options = {"fusion": "rrf", "rrf_k": 10, "weights": {"semantic": 0.9}, "explain": True}

    async def routed(query: str, **extra: Any) -> dict[str, Any]:
        response = await client.post("/v1/search", json={"query": query, "project": project, **extra})
        assert response.status_code == 200, response.text
        return dict(response.json())

    lexical = await routed('"idle connections" ingress', **options)
    cascading = await routed("fix port 2024", **options)
    cascading_plain = await routed("fix port 2024", explain=True)
    hybrid = await routed("why do idle connections get dropped", **options)
    by_get = await client.get(
        "/memory/query", params={"query": "#networking", "project": project, "fusion": "rrf", "explain": "true"}
    )

    unused = ["fusion", "weights.semantic", "rrf_k"]
    assert (lexical["search_strategy"], lexical["query_analysis"]["unused_options"]) == ("Lexical", unused)
    assert (cascading["search_strategy"], cascading["query_analysis"]["unused_options"]) == ("Cascading", unused)
    # Not used at all: not even the readable final_score of a cascading search weighs the legs by them.
    scores = [[hit["id"], hit["final_score"]] for hit in cascading["results"]]
    assert scores == [[hit["id"], hit["final_score"]] for hit in cascading_plain["results"]]
    assert (hybrid["search_strategy"], hybrid["query_analysis"]["unused_options"]) == ("Hybrid", [])
    assert by_get.status_code == 200, by_get.text
    assert by_get.json()["query_analysis"]["unused_options"] == ["fusion"]


# ------------------------------------------------------------------------------------------ collapse


CROWDING_SECTIONS = 60  # more than RRF_RETRIEVE_K (50): one document's chunks fill every leg's candidates


@pytest.fixture(scope="module")
async def crowded_project(client) -> str:
    """One harbour log of 60 sections that crowd the top of both legs, and twelve one-note documents below them."""
    name = f"crowded-{uuid.uuid4().hex[:8]}"
    log = "# Harbour log\n\n" + "\n\n".join(
        f"## Session {n}\n\nWe painted the harbour boats at dawn, session {n} of the harbour series."
        for n in range(CROWDING_SECTIONS)
    )
    notes = [
        {"id": f"note-{n:02}", "title": f"Note {n}", "text": f"A sketch of the harbour from the hill, note {n}."}
        for n in range(12)
    ]
    documents = [{"id": "harbour-log", "title": "Harbour log", "text": log}, *notes]
    response = await client.post(f"/v1/projects/{name}/documents", json={"documents": documents})
    assert response.status_code == 201, response.text
    for document in documents:
        await wait_indexed(client, name, document["id"])
    return name


@pytest.mark.parametrize("strategy", ["hybrid", "semantic", "lexical"])
async def test_collapse_fills_the_page_when_one_document_crowds_the_candidates(
    client, crowded_project: str, strategy: str
) -> None:
    body = {"query": "painted the harbour boats at dawn", "project": crowded_project, "strategy": strategy}

    collapsed = await client.post("/v1/search", json=body | {"collapse": 1, "limit": 10})
    uncollapsed = await client.post("/v1/search", json=body | {"limit": 10})

    assert collapsed.status_code == 200, collapsed.text
    documents = [hit["document_id"] for hit in collapsed.json()["results"]]
    # The 50 candidates of each leg were all the log's: the page held one hit although twelve more documents matched.
    assert len(documents) == len(set(documents)) == 10
    assert documents[0] == "harbour-log"
    assert {hit["document_id"] for hit in uncollapsed.json()["results"]} == {"harbour-log"}  # what crowds the top
    assert collapsed.json()["degraded"] is False


# ------------------------------------------------------------------------------------------ filter parity


FILTER_CASES: list[tuple[dict[str, Any], set[str]]] = [
    ({}, {"net-2024", "net-2023", "db-timeouts", "notes"}),
    ({"tags": ["networking"]}, {"net-2024", "net-2023", "notes"}),
    ({"tags": ["networking", "ingress"]}, {"net-2024"}),
    ({"tags": ["NETWORKING", "Notes"]}, {"notes"}),
    ({"level": "L1"}, {"net-2024", "net-2023", "db-timeouts"}),
    ({"date_from": "2024-01-01T00:00:00Z", "date_to": "2025-01-01T00:00:00Z"}, {"net-2024"}),
    ({"date_from": "2023-01-01T00:00:00Z"}, {"net-2024", "net-2023"}),
    ({"source_prefix": "runbooks/net/"}, {"net-2024", "net-2023"}),
    ({"tags": ["database"], "date_from": "2020-01-01T00:00:00Z"}, set()),
]


@pytest.mark.parametrize(("filters", "allowed"), FILTER_CASES, ids=[str(case) for case, _ in FILTER_CASES])
async def test_both_legs_apply_the_same_filters(
    client, project: str, filters: dict[str, Any], allowed: set[str]
) -> None:
    def body(strategy: str) -> dict[str, Any]:
        return {
            "query": "timeout connections",
            "project": project,
            "strategy": strategy,
            "limit": 100,
            "filters": filters,
        }

    semantic = await client.post("/v1/search", json=body("semantic"))
    lexical = await client.post("/v1/search", json=body("lexical"))

    assert semantic.status_code == 200, semantic.text
    assert lexical.status_code == 200, lexical.text
    semantic_documents = {hit["document_id"] for hit in semantic.json()["results"]}
    lexical_documents = {hit["document_id"] for hit in lexical.json()["results"]}
    # The vector leg ranks every chunk that passes the filters, so it returns exactly the allowed documents;
    # the lexical leg returns those that match the words, never one the filters exclude.
    assert semantic_documents == allowed
    assert lexical_documents <= allowed
    if allowed:
        assert lexical_documents
    for payload in (semantic.json(), lexical.json()):
        assert payload["degraded"] is False
        assert all(hit["source"] != "elsewhere" for hit in payload["results"])


async def one_leg_hits(client, project: str, query: str, strategy: str) -> list[dict[str, Any]]:
    """`GET /memory/query` on one leg, 100 hits deep."""
    response = await client.get(
        "/memory/query", params={"query": query, "project": project, "strategy": strategy, "limit": 100}
    )
    assert response.status_code == 200, response.text
    return list(response.json()["results"])


async def test_a_hash_tag_in_the_query_filters_both_legs_ignoring_case(client, project: str) -> None:
    for strategy in ("semantic", "lexical"):
        hits = await one_leg_hits(client, project, "#NetWorking timeouts", strategy)

        tags = {hit["document_id"]: hit["tags"] for hit in hits}
        assert "notes" in tags, strategy
        assert set(tags) <= {"net-2024", "net-2023", "notes"}, strategy
        assert tags["notes"] == ["Networking", "notes"]  # as written


async def test_listing_documents_by_tag_ignores_case(client, project: str) -> None:
    response = await client.get(f"/v1/projects/{project}/documents", params={"tag": "NETWORKING"})

    assert response.status_code == 200, response.text
    assert sorted(item["id"] for item in response.json()["items"]) == ["net-2023", "net-2024", "notes"]


async def test_a_blank_tag_filter_is_a_400_as_a_blank_tag_is_at_ingest(client, project: str) -> None:
    searched = await client.post(
        "/v1/search", json={"query": "ingress", "project": project, "filters": {"tags": ["  "]}}
    )
    listed = await client.get(f"/v1/projects/{project}/documents", params={"tag": "  "})
    deleted = await client.delete(f"/v1/projects/{project}/documents", params={"tag": "  "})
    # An empty tag beside another filter was dropped: the delete then took documents of every tag.
    widened = await client.delete(f"/v1/projects/{project}/documents", params={"tag": "", "source_prefix": "x"})
    empty_listing = await client.get(f"/v1/projects/{project}/documents", params={"tag": ""})

    assert "blank" in assert_problem(searched, "filters.tags")["detail"]
    assert "blank" in assert_problem(listed, "tag")["detail"]
    assert "blank" in assert_problem(deleted, "tag")["detail"]
    assert "empty" in assert_problem(widened, "tag")["detail"]
    assert "empty" in assert_problem(empty_listing, "tag")["detail"]


async def test_one_weight_alone_gives_the_other_leg_its_complement(client, project: str) -> None:
    async def fusion(weights: dict[str, float] | None) -> dict[str, Any]:
        body: dict[str, Any] = {"query": "ingress timeout", "project": project, "strategy": "hybrid", "limit": 1}
        if weights is not None:
            body["weights"] = weights
        response = await client.post("/v1/search", json=body)
        assert response.status_code == 200, response.text
        return dict(response.json()["results"][0]["score_breakdown"]["fusion"])

    both = await fusion({"semantic": 0.25, "lexical": 0.75})

    assert await fusion({"semantic": 0.25}) == both
    assert await fusion({"lexical": 0.75}) == both
    assert await fusion({}) == await fusion(None)  # an empty object is the defaults, not 1.0 each


def nfd(text: str) -> str:
    """`text` decomposed (`ü` as `u` + U+0308), as macOS file names and some PDF copies give it."""
    return unicodedata.normalize("NFD", text)


async def test_text_is_found_whichever_unicode_form_it_was_written_or_asked_in(client) -> None:
    name = f"forms-{uuid.uuid4().hex[:8]}"
    written = [
        {
            "id": "trip",
            "title": nfd("Zoë's trip"),
            "text": nfd("Zoë visited Zürich with Chloé."),
            "tags": [nfd("Zürich")],
        },
        # White space around a tag (a list split by hand) is not part of it.
        {"id": "fix", "title": "Björn's fix", "text": "Björn fixed the Göteborg resolver.", "tags": [" Göteborg\t"]},
    ]
    response = await client.post(f"/v1/projects/{name}/documents", json={"documents": written})
    assert response.status_code == 201, response.text
    for document in written:
        await wait_indexed(client, name, document["id"])

    # Each asked in the other form: the analyzer split a decomposed word at its combining mark.
    for query, expected in (("Zürich Chloé", "trip"), ("Zoë", "trip"), (nfd("Göteborg Björn"), "fix")):
        found = await client.post("/v1/search", json={"query": query, "project": name, "strategy": "lexical"})
        assert found.status_code == 200, found.text
        assert [hit["document_id"] for hit in found.json()["results"]] == [expected], query
    for tag, expected in (("zürich", "trip"), (nfd("GÖTEBORG"), "fix")):
        body = {"query": "resolver trip", "project": name, "strategy": "lexical", "filters": {"tags": [tag]}}
        found = await client.post("/v1/search", json=body)
        assert [hit["document_id"] for hit in found.json()["results"]] == [expected], tag
    stored = (await client.get(f"/v1/projects/{name}/documents/trip")).json()
    assert (stored["title"], stored["tags"]) == ("Zoë's trip", ["Zürich"])  # precomposed, renders the same
    assert stored["chunks"][0]["text"] == "Zoë visited Zürich with Chloé."
    assert (await client.get(f"/v1/projects/{name}/documents/fix")).json()["tags"] == ["Göteborg"]
    listed = await client.get(f"/v1/projects/{name}/documents", params={"tag": "göteborg "})
    assert [item["id"] for item in listed.json()["items"]] == ["fix"]


async def test_a_word_with_an_invisible_character_inside_is_found_by_the_word(client) -> None:
    name = f"invisible-{uuid.uuid4().hex[:8]}"
    pasted = {"id": "pdf", "title": "Pasted", "text": "The in\u200bvisible mar\u00adgay sat by the fo\u2060ssa."}
    response = await client.post(f"/v1/projects/{name}/documents", json=pasted)
    assert response.status_code == 201, response.text
    await wait_indexed(client, name, "pdf")

    for query in ("invisible", "margay", "fossa", "mar\u00adgay"):
        found = await client.post("/v1/search", json={"query": query, "project": name, "strategy": "lexical"})
        assert [hit["document_id"] for hit in found.json()["results"]] == ["pdf"], query
    stored = (await client.get(f"/v1/projects/{name}/documents/pdf")).json()
    assert stored["chunks"][0]["text"] == "The invisible margay sat by the fossa."


async def test_projects_never_mix(client, project: str) -> None:
    for strategy in ("semantic", "lexical", "hybrid", "cascading"):
        response = await client.post(
            "/v1/search",
            json={
                "query": "ingress idle connections",
                "project": f"{project}-other",
                "strategy": strategy,
                "limit": 100,
            },
        )

        assert response.status_code == 200, response.text
        assert {hit["document_id"] for hit in response.json()["results"]} == {"elsewhere"}, strategy


async def test_query_dates_filter_both_legs(client, project: str) -> None:
    # The year in the words drops the 2024 runbook on both legs; undated documents stay (the range is
    # read from the query, not asked for), while an explicit date_from is strict (test above).
    for strategy in ("semantic", "lexical"):
        hits = await one_leg_hits(client, project, "ingress timeouts 2023", strategy)

        assert {hit["document_id"] for hit in hits} == {"net-2023", "db-timeouts", "notes"}, strategy
