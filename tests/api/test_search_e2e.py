"""End to end on the embedded default: a runbook corpus ingested over HTTP, searched over HTTP.

The corpus is `tests/fixtures/runbooks/` (markdown with front matter: title, tags, date). Every search
response is validated against the `SearchResponse` schema the app itself publishes at
`/schema/openapi.json`, so the documented shape and the served shape cannot drift apart.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from app.ingestion.sources import read_note_folder
from app.retrieval.fusion import IDENTICAL_SCORES_Z
from app.retrieval.relevance import BM25_HALF_EXPONENT, BM25_HALF_RELEVANCE, BM25_HALF_TERMS
from tests.api.conftest import wait_indexed

pytestmark = pytest.mark.slow  # ingests and embeds a 21-document corpus once per module

CORPUS_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "runbooks"

# (query, expected top document): the reference's query styles, one clear answer each.
LABELLED_QUERIES: list[tuple[str, str]] = [
    ("How do I fix kubernetes port 8080?", "runbooks/kubernetes/port-forward.md"),
    ("container killed for exceeding its memory limit", "runbooks/kubernetes/oomkilled.md"),
    ("pod stuck in CrashLoopBackOff after a release", "runbooks/kubernetes/crashloopbackoff.md"),
    ("hpa not scaling up although cpu is high", "runbooks/kubernetes/hpa-autoscaling.md"),
    ("pods cannot resolve service names", "runbooks/kubernetes/coredns.md"),
    ("pg table bloat with dead tuples", "runbooks/postgres/vacuum-bloat.md"),
    ("steps to promote a standby when the primary postgres is lost", "runbooks/postgres/failover.md"),
    ("point-in-time recovery from backup", "runbooks/postgres/backup-restore.md"),
    ('"too many clients" postgres', "runbooks/postgres/connection-limits.md"),
    ("renew an expired TLS certificate with cert-manager", "runbooks/platform/tls-cert-renewal.md"),
    ("redis evicting keys because the cache is full", "runbooks/platform/redis-eviction.md"),
    ("why is kafka consumer lag growing", "runbooks/platform/kafka-consumer-lag.md"),
    ("rollback a broken helm release in prod", "runbooks/platform/helm-rollback.md"),
    ("rotate the database password in vault", "runbooks/platform/rotate-secrets.md"),
    ("#networking @devops", "docs/network-policies.md"),
    ("fix port 2024", "runbooks/deployment-2024.md"),
    ("What is the difference between a StatefulSet and a Deployment?", "docs/statefulset-vs-deployment.md"),
    ("where is the on-call escalation policy", "docs/oncall-handbook.md"),
    ("CDN outage in november 2023", "notes/incident-2023-11-cdn-outage.md"),
    ("why did SSO login fail in June 2024", "notes/postmortem-2024-06-sso-login.md"),
    ("pods killed for memory NOT redis", "runbooks/kubernetes/oomkilled.md"),
    ("k8s persistent volume claim per pod with stable names", "docs/statefulset-vs-deployment.md"),
    ("#database restore -vacuum", "runbooks/postgres/backup-restore.md"),
]


def corpus_documents() -> list[dict[str, Any]]:
    """The fixture corpus as `POST /v1/projects/{p}/documents` bodies (id = source = relative path)."""
    documents = read_note_folder(CORPUS_DIR, project_id="unused")
    return [
        {
            "id": document.document_id,
            "source": document.source,
            "title": document.title,
            "text": document.text,
            "tags": list(document.tags),
            "event_time": document.event_time.isoformat() if document.event_time else None,
        }
        for document in documents
    ]


@pytest.fixture(scope="module")
async def corpus_project(api_client) -> str:
    """A project holding the whole runbook corpus, ingested in one batch and lexically indexed."""
    project = f"e2e-{uuid.uuid4().hex[:8]}"
    documents = corpus_documents()
    response = await api_client.post(f"/v1/projects/{project}/documents", json={"documents": documents})
    assert response.status_code == 201, response.text
    assert {outcome["status"] for outcome in response.json()["documents"]} == {"created"}
    for document in documents:
        await wait_indexed(api_client, project, document["id"], timeout_s=30.0)
    return project


@pytest.fixture(scope="module")
async def response_validator(api_client) -> Draft202012Validator:
    """A validator for the `SearchResponse` component of the app's own OpenAPI document."""
    response = await api_client.get("/schema/openapi.json")
    assert response.status_code == 200
    document = response.json()
    # `$ref`s point at `#/components/schemas/...`: keep `components` at the root so they resolve.
    schema = {**document["components"]["schemas"]["SearchResponse"], "components": document["components"]}
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


async def search(client, validator: Draft202012Validator, body: dict[str, Any]) -> dict[str, Any]:
    """POST /v1/search, assert 200, validate the body against the published schema, return it."""
    response = await client.post("/v1/search", json=body)
    assert response.status_code == 200, response.text
    payload = response.json()
    validator.validate(payload)
    return payload


def top_documents(payload: dict[str, Any], count: int = 3) -> list[str]:
    return [hit["document_id"] for hit in payload["results"][:count]]


def test_corpus_is_the_size_the_issue_asks_for() -> None:
    documents = corpus_documents()

    assert 15 <= len(documents) <= 25
    assert all(document["tags"] for document in documents)
    assert sum(1 for document in documents if document["event_time"]) >= 3
    assert {expected for _, expected in LABELLED_QUERIES} <= {document["id"] for document in documents}


@pytest.mark.parametrize(("query", "expected"), LABELLED_QUERIES, ids=[query for query, _ in LABELLED_QUERIES])
async def test_labelled_query_ranks_expected_document_first(
    api_client, corpus_project, response_validator, query: str, expected: str
) -> None:
    response = await api_client.get("/memory/query", params={"query": query, "project": corpus_project, "limit": 5})

    assert response.status_code == 200, response.text
    payload = response.json()
    response_validator.validate(payload)
    assert payload["results"], f"no results for {query!r}"
    assert payload["results"][0]["document_id"] == expected, top_documents(payload)
    assert payload["results"][0]["source"] == expected
    assert [hit["rank"] for hit in payload["results"]] == list(range(1, len(payload["results"]) + 1))


async def test_level_filter_keeps_only_that_level(api_client, corpus_project, response_validator) -> None:
    body = {"query": "postgres database", "project": corpus_project, "limit": 50, "filters": {"level": "L0"}}

    payload = await search(api_client, response_validator, body)

    assert payload["results"]
    assert {hit["level"] for hit in payload["results"]} == {"L0"}


async def test_level_filter_accepts_a_list(api_client, corpus_project, response_validator) -> None:
    body = {"query": "postgres database", "project": corpus_project, "limit": 50, "filters": {"level": ["L0", "L1"]}}

    payload = await search(api_client, response_validator, body)

    assert {hit["level"] for hit in payload["results"]} == {"L0", "L1"}


async def test_tag_filter_requires_every_tag(api_client, corpus_project, response_validator) -> None:
    body = {"query": "kubernetes", "project": corpus_project, "limit": 50, "filters": {"tags": ["networking", "dns"]}}

    payload = await search(api_client, response_validator, body)

    assert payload["results"]
    assert {hit["document_id"] for hit in payload["results"]} == {"runbooks/kubernetes/coredns.md"}


async def test_source_prefix_filter(api_client, corpus_project, response_validator) -> None:
    body = {
        "query": "what to do when things break",
        "project": corpus_project,
        "limit": 50,
        "filters": {"source_prefix": "runbooks/postgres/"},
    }

    payload = await search(api_client, response_validator, body)

    documents = {hit["document_id"] for hit in payload["results"]}
    assert documents == {
        "runbooks/postgres/vacuum-bloat.md",
        "runbooks/postgres/failover.md",
        "runbooks/postgres/backup-restore.md",
        "runbooks/postgres/connection-limits.md",
    }


async def test_date_range_filter_is_half_open_on_event_time(api_client, corpus_project, response_validator) -> None:
    body = {
        "query": "deploy incident",
        "project": corpus_project,
        "limit": 50,
        "filters": {"date_from": "2024-01-01T00:00:00Z", "date_to": "2024-06-03T00:00:00Z"},
    }

    payload = await search(api_client, response_validator, body)

    # The SSO postmortem is dated exactly 2024-06-03: date_to is exclusive.
    assert {hit["document_id"] for hit in payload["results"]} == {"runbooks/deployment-2024.md"}
    for hit in payload["results"]:
        assert datetime.fromisoformat(hit["event_time"]).year == 2024


@pytest.mark.parametrize("strategy", ["hybrid", "semantic", "lexical"])
async def test_an_excluded_word_leaves_out_every_chunk_holding_it_on_every_leg(
    api_client, corpus_project, response_validator, strategy: str
) -> None:
    asked = {"project": corpus_project, "strategy": strategy, "limit": 50}
    before = await search(api_client, response_validator, {**asked, "query": "consumer lag growing"})
    after = await search(api_client, response_validator, {**asked, "query": "consumer lag growing -kafka"})

    assert "runbooks/platform/kafka-consumer-lag.md" in {hit["document_id"] for hit in before["results"]}
    assert after["results"]
    assert all("kafka" not in f"{hit['breadcrumb']} {hit['text']} {hit['source']}".lower() for hit in after["results"])


@pytest.mark.parametrize(
    ("strategy", "label"),
    [("hybrid", "Hybrid"), ("semantic", "Semantic"), ("lexical", "Lexical"), ("cascading", "Cascading")],
)
async def test_strategy_override(api_client, corpus_project, response_validator, strategy: str, label: str) -> None:
    body = {"query": "promote the standby postgres replica", "project": corpus_project, "strategy": strategy}

    payload = await search(api_client, response_validator, body)

    assert payload["search_strategy"] == label
    assert payload["strategy_confidence"] == 1.0
    assert payload["results"][0]["document_id"] == "runbooks/postgres/failover.md"
    if strategy == "semantic":
        assert all(hit["lexical_score"] is None for hit in payload["results"])
        assert payload["metrics"]["lexical_results_count"] == 0
    if strategy == "lexical":
        assert all(hit["semantic_score"] is None for hit in payload["results"])
        assert payload["metrics"]["semantic_results_count"] == 0
        assert payload["metrics"]["embed_time_ms"] == 0


@pytest.mark.parametrize("fusion", ["rrf", "weighted", "zscore"])
async def test_fusion_override(api_client, corpus_project, response_validator, fusion: str) -> None:
    body = {"query": "redis cache evicting keys", "project": corpus_project, "strategy": "hybrid", "fusion": fusion}

    payload = await search(api_client, response_validator, body)

    assert payload["fusion_method"] == fusion
    assert {hit["fusion_method"] for hit in payload["results"]} == {fusion}
    assert payload["results"][0]["document_id"] == "runbooks/platform/redis-eviction.md"
    scores = [hit["final_score"] for hit in payload["results"]]
    assert scores == sorted(scores, reverse=True)


async def test_rrf_k_sets_the_contributions(api_client, corpus_project, response_validator) -> None:
    body = {"query": "kafka consumer lag", "project": corpus_project, "fusion": "rrf", "rrf_k": 10}

    payload = await search(api_client, response_validator, body)

    for hit in payload["results"]:
        breakdown = hit["score_breakdown"]
        for leg in ("semantic", "lexical"):
            rank = breakdown[f"{leg}_rank"]
            expected = 1 / (10 + rank) if rank is not None else 0.0
            assert breakdown["rrf_components"][f"{leg}_contribution"] == pytest.approx(expected)
        components = breakdown["rrf_components"]
        # `final_score` is the readable relevance; the RRF sum that ordered the hits is the fusion's score.
        assert breakdown["fusion"]["method"] == "rrf"
        assert breakdown["fusion"]["score"] == pytest.approx(
            components["semantic_contribution"] + components["lexical_contribution"]
        )
        assert 0.0 <= hit["final_score"] <= 1.0


async def test_weights_zero_out_a_leg(api_client, corpus_project, response_validator) -> None:
    body = {
        "query": "kafka consumer lag",
        "project": corpus_project,
        "fusion": "rrf",
        "weights": {"semantic": 1.0, "lexical": 0.0},
    }

    payload = await search(api_client, response_validator, body)

    assert payload["results"]
    assert all(hit["score_breakdown"]["rrf_components"]["lexical_contribution"] == 0 for hit in payload["results"])
    semantic_ranks = [hit["score_breakdown"]["semantic_rank"] for hit in payload["results"]]
    assert semantic_ranks == sorted(semantic_ranks)  # ranked by the semantic leg alone


async def test_collapse_keeps_n_chunks_per_document(api_client, corpus_project, response_validator) -> None:
    base = {"query": "postgres failover replica standby primary", "project": corpus_project, "limit": 20}

    spread = await search(api_client, response_validator, base)
    collapsed = await search(api_client, response_validator, {**base, "collapse": 1})

    spread_documents = [hit["document_id"] for hit in spread["results"]]
    collapsed_documents = [hit["document_id"] for hit in collapsed["results"]]
    assert len(spread_documents) > len(set(spread_documents))  # without collapse a document repeats
    assert len(collapsed_documents) == len(set(collapsed_documents))
    assert collapsed_documents[0] == "runbooks/postgres/failover.md"


async def test_min_score_drops_weak_hits(api_client, corpus_project, response_validator) -> None:
    base = {"query": "renew tls certificate", "project": corpus_project, "limit": 20, "strategy": "semantic"}
    everything = await search(api_client, response_validator, base)
    threshold = everything["results"][2]["final_score"]

    kept = await search(api_client, response_validator, {**base, "min_score": threshold})

    assert kept["results"]
    assert len(kept["results"]) < len(everything["results"])
    assert all(hit["final_score"] >= threshold for hit in kept["results"])


async def test_explain_returns_the_query_analysis(api_client, corpus_project, response_validator) -> None:
    body = {"query": "How do I deploy to K8s in March 2024?", "project": corpus_project, "explain": True}

    explained = await search(api_client, response_validator, body)
    plain = await search(api_client, response_validator, {**body, "explain": False})

    analysis = explained["query_analysis"]
    assert analysis["question_type"] == "procedural"
    assert analysis["entities"]["expansions"] == {"k8s": "kubernetes"}
    assert analysis["entities"]["years"] == [2024]
    assert analysis["entities"]["months"] == [3]
    assert analysis["event_time_from"].startswith("2024-03-01")
    assert analysis["event_time_to"].startswith("2024-04-01")
    assert plain["query_analysis"] is None


async def test_the_lexical_relevance_reads_bm25_against_the_querys_length(api_client, response_validator) -> None:
    """BM25 sums over the query's terms: a short query's best match is not read as less relevant for being short."""
    project = f"length-{uuid.uuid4().hex[:8]}"
    document = {"id": "tls", "text": "Renew an expired TLS certificate with cert-manager, then restart the ingress."}
    created = await api_client.post(f"/v1/projects/{project}/documents", json=document)
    assert created.status_code == 201, created.text
    await wait_indexed(api_client, project, "tls", timeout_s=30.0)

    for query, terms in (("renew expired certificate", 3), ("renew the expired tls certificate, restart ingress", 6)):
        body = {"query": query, "project": project, "strategy": "lexical", "explain": True}
        payload = await search(api_client, response_validator, body)
        (only,) = payload["results"]
        (leg_hit,) = payload["leg_rankings"]["lexical"]
        bm25_half = BM25_HALF_RELEVANCE * (terms / BM25_HALF_TERMS) ** BM25_HALF_EXPONENT
        assert only["score_breakdown"]["relevance"]["lexical"] == pytest.approx(
            leg_hit["score"] / (leg_hit["score"] + bm25_half)
        )
        assert only["final_score"] == pytest.approx(only["score_breakdown"]["relevance"]["lexical"])


async def test_one_document_matched_on_both_legs_reads_as_relevant(api_client, response_validator) -> None:
    """Tried as a new user would: one document, one query that matches it; the default fusion (z-score)."""
    project = f"single-{uuid.uuid4().hex[:8]}"
    document = {
        "id": "tls",
        "source": "runbooks/tls.md",
        "title": "Renew an expired TLS certificate",
        "text": "When a TLS certificate expires, renew it with cert-manager and restart the ingress controller.",
    }
    created = await api_client.post(f"/v1/projects/{project}/documents", json=document)
    assert created.status_code == 201, created.text
    await wait_indexed(api_client, project, "tls", timeout_s=30.0)

    payload = await search(
        api_client, response_validator, {"query": "renew expired tls certificate", "project": project}
    )
    (only,) = payload["results"]

    breakdown = only["score_breakdown"]
    assert breakdown["fusion"]["method"] == "zscore"
    # A lone hit has no z-score (IDENTICAL_SCORES_Z stands in): not what a person should read.
    assert breakdown["fusion"]["score"] == IDENTICAL_SCORES_Z
    assert breakdown["rrf_components"] == {  # the reference's field, kept: the same contributions
        "semantic_contribution": breakdown["fusion"]["semantic_contribution"],
        "lexical_contribution": breakdown["fusion"]["lexical_contribution"],
    }
    assert 0.3 < breakdown["relevance"]["semantic"] <= 1.0
    assert 0.0 < breakdown["relevance"]["lexical"] < 1.0
    assert 0.3 < only["final_score"] <= 1.0
    assert only["final_score"] == pytest.approx(
        0.45 * breakdown["relevance"]["semantic"] + 0.55 * breakdown["relevance"]["lexical"]
    )
    threshold = only["final_score"]
    kept = await search(
        api_client,
        response_validator,
        {"query": "renew expired tls certificate", "project": project, "min_score": threshold},
    )
    dropped = await search(
        api_client,
        response_validator,
        {"query": "renew expired tls certificate", "project": project, "min_score": threshold + 0.01},
    )
    assert [hit["id"] for hit in kept["results"]] == [only["id"]]
    assert dropped["results"] == []


def assert_final_score_is_the_lowest_mean_so_far(payload: dict[str, Any]) -> None:
    lowest = 1.0
    for hit in payload["results"]:
        relevance = hit["score_breakdown"]["relevance"]
        assert relevance["mean"] == pytest.approx(0.45 * relevance["semantic"] + 0.55 * relevance["lexical"])
        lowest = min(lowest, relevance["mean"])
        assert hit["final_score"] == pytest.approx(lowest)


@pytest.mark.parametrize("query", ["kafka consumer lag", "renew tls certificate", "fix port 2024"])
async def test_final_score_is_the_lowest_relevance_mean_of_the_hit_and_those_above_it(
    api_client, corpus_project, response_validator, query: str
) -> None:
    body = {"query": query, "project": corpus_project, "strategy": "hybrid", "limit": 30}

    payload = await search(api_client, response_validator, body)

    assert len(payload["results"]) > 10
    assert_final_score_is_the_lowest_mean_so_far(payload)


async def test_a_lexical_match_ranked_below_a_hit_that_reads_zero_says_what_it_reads_alone(
    api_client, response_validator
) -> None:
    """Seen after a reindex, and not caused by it: a hit the lexical leg found, final_score 0.

    Fusion gives the lexical leg's last hit the floor a missed chunk gets, so it is ranked by its cosine alone,
    here below semantic-only hits whose cosine is below 0 (they read 0, and the cap carries that down).
    """
    project = f"notes-{uuid.uuid4().hex[:8]}"
    notes = read_note_folder(Path(__file__).resolve().parents[1] / "fixtures" / "notes", project_id=project)
    documents = [{"id": note.document_id, "source": note.source, "text": note.text} for note in notes]
    response = await api_client.post(f"/v1/projects/{project}/documents", json={"documents": documents})
    assert response.status_code == 201, response.text
    for document in documents:
        await wait_indexed(api_client, project, document["id"], timeout_s=30.0)
    capped = []

    for query in ("taken any their", "pick kubectl", "without write pick"):
        payload = await search(
            api_client, response_validator, {"query": query, "project": project, "strategy": "hybrid"}
        )
        assert_final_score_is_the_lowest_mean_so_far(payload)
        capped += [
            hit
            for hit in payload["results"]
            if hit["score_breakdown"]["lexical_rank"] is not None and hit["final_score"] == 0.0
        ]

    assert capped
    assert all(hit["score_breakdown"]["relevance"]["mean"] > 0.05 for hit in capped)


async def test_a_paragraph_query_of_8000_characters_is_answered(api_client, corpus_project, response_validator) -> None:
    sentence = 'Our ingress TLS certificate expired overnight and "cert-manager" did not renew it in 2024. '
    paragraph = (sentence * (8000 // len(sentence) + 1))[:8000]

    payload = await search(api_client, response_validator, {"query": paragraph, "project": corpus_project})

    assert payload["search_strategy"].lower().startswith("hybrid")  # a passage is never routed away from hybrid
    assert top_documents(payload, 1) == ["runbooks/platform/tls-cert-renewal.md"]
    assert all(0.0 <= hit["final_score"] <= 1.0 for hit in payload["results"])


async def test_the_boosts_a_hit_gained_are_in_its_fusion_breakdown_and_add_up_to_its_score(
    api_client, response_validator
) -> None:
    """A when-question over turns of one session: the date and neighbour boosts show, and add up."""
    project = f"turns-{uuid.uuid4().hex[:8]}"
    session = "2023-06-03T18:00:00Z"
    turns = [
        ("Caroline", "Did you finish anything new lately?"),
        ("Melanie", "Yes, I painted the lake at sunrise on 2 June, all pinks and oranges."),
        ("Caroline", "I would love to see the painting of the lake."),
    ]
    documents = [
        {"id": f"chat:S1:{n}", "title": speaker, "text": text, "event_time": session}
        for n, (speaker, text) in enumerate(turns, start=1)
    ]
    created = await api_client.post(f"/v1/projects/{project}/documents", json={"documents": documents})
    assert created.status_code == 201, created.text
    for document in documents:
        await wait_indexed(api_client, project, document["id"], timeout_s=30.0)

    payload = await search(
        api_client,
        response_validator,
        {"query": "When did Melanie paint the lake?", "project": project, "strategy": "hybrid", "fusion": "zscore"},
    )

    boosts_seen: set[str] = set()
    for hit in payload["results"]:
        fusion = hit["score_breakdown"]["fusion"]
        legs = fusion["semantic_contribution"] + fusion["lexical_contribution"]
        assert fusion["score"] == pytest.approx(legs + sum(fusion["boosts"].values()))
        boosts_seen |= fusion["boosts"].keys()
    melanie = next(hit for hit in payload["results"] if hit["document_id"] == "chat:S1:2")
    assert "date" in melanie["score_breakdown"]["fusion"]["boosts"]  # "on 2 June", for a when-question
    assert "neighbours" in boosts_seen
