"""`PoimenClient` against a live `poimen serve` (embedded PostgreSQL, tantivy, the real model), auth off."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from poimen_client.clients import PoimenClient
from poimen_client.errors import ConflictError, InvalidRequestError, NotFoundError, PayloadTooLargeError
from poimen_client.models import Document, DocumentFilter, FusionWeights, SearchFilters, SearchQuery
from poimen_client.project_ids import PROJECT_ID_RULE

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

pytestmark = pytest.mark.integration

NOTES = [
    Document(id="k8s/ports.md", text="# Ports\n\nIf port 8080 is taken, find the process with lsof.", tags=["ops"]),
    Document(id="k8s/dns.md", text="# DNS\n\nCoreDNS resolves service names inside the cluster.", tags=["ops"]),
    Document(id="cooking/bread.md", text="# Bread\n\nSourdough needs a starter fed every day.", tags=["food"]),
    Document(id="cooking/soup.md", text="# Soup\n\nA lentil soup simmers for forty minutes.", tags=["food"]),
    Document(id="travel/rail.md", text="# Rail\n\nThe night train leaves Vienna at ten.", tags=["travel"]),
]


@pytest.fixture
def client(service_url: str) -> Iterator[PoimenClient]:
    with PoimenClient(service_url) as client:
        yield client


LEXICAL_INDEX_DEADLINE_S = 30.0


@pytest.fixture
def project(client: PoimenClient, unique_name: str) -> str:
    """A project holding NOTES, every one of them in the lexical index too (the outbox fills it after the write)."""
    client.ingest(unique_name, NOTES)
    deadline = time.monotonic() + LEXICAL_INDEX_DEADLINE_S
    while client.project_stats(unique_name).lexically_indexed < len(NOTES):
        if time.monotonic() > deadline:
            pytest.fail(f"NOTES not all lexically indexed within {LEXICAL_INDEX_DEADLINE_S:g} s")
        time.sleep(0.05)
    return unique_name


def test_ingest_answers_each_document_with_its_version(client: PoimenClient, unique_name: str) -> None:
    created = client.ingest(unique_name, Document(id="a", text="# A\n\nAlpha."))
    updated = client.ingest(unique_name, Document(id="a", text="# A\n\nAlpha, changed."))

    assert created.project == unique_name
    assert [(outcome.id, outcome.status) for outcome in created.documents + updated.documents] == [
        ("a", "created"), ("a", "updated"),
    ]  # fmt: skip
    assert updated.documents[0].version > created.documents[0].version


def test_get_document_returns_chunks_and_context(client: PoimenClient, unique_name: str) -> None:
    when = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
    written = client.ingest(
        unique_name, Document(id="notes/a b?.md", text="# Title\n\nBody.", context="asked before", event_time=when)
    )

    document = client.get_document(unique_name, "notes/a b?.md")

    assert (document.id, document.context, document.event_time) == ("notes/a b?.md", "asked before", when)
    assert document.version == written.documents[0].version
    assert [chunk.text for chunk in document.chunks] == ["Body."]


def test_search_finds_the_matching_document_first(client: PoimenClient, project: str) -> None:
    answer = client.search(project, SearchQuery(query="which process holds port 8080", strategy="semantic", limit=3))

    assert answer.results[0].document_id == "k8s/ports.md"
    assert answer.results[0].rank == 1
    assert answer.metrics.final_results_count == len(answer.results)


def test_one_weight_alone_is_sent_alone_and_the_other_leg_gets_its_complement(
    client: PoimenClient, project: str
) -> None:
    def fusion(weights: FusionWeights) -> object:
        answer = client.search(project, SearchQuery(query="port 8080", strategy="hybrid", limit=1, weights=weights))
        return answer.results[0].final_score, answer.results[0].score_breakdown.rrf_components

    assert fusion(FusionWeights(semantic=0.25)) == fusion(FusionWeights(semantic=0.25, lexical=0.75))


def test_explain_reads_the_fused_score_the_relevance_and_each_legs_ranking(client: PoimenClient, project: str) -> None:
    answer = client.search(project, SearchQuery(query="port 8080", strategy="hybrid", explain=True, limit=3))

    best = answer.results[0].score_breakdown
    assert best.fusion.method == answer.fusion_method
    assert best.fusion.score == pytest.approx(best.fusion.semantic_contribution + best.fusion.lexical_contribution)
    assert best.relevance.semantic is not None
    assert best.relevance.lexical is not None  # NOTES are all in the lexical index (`project`)
    assert answer.leg_rankings is not None
    assert answer.leg_rankings.semantic is not None
    assert answer.leg_rankings.semantic[0].document_id == "k8s/ports.md"


@pytest.mark.parametrize("document_id", ["..", "notes/../bread", "", "a//b", "./x"])
def test_an_id_with_an_empty_or_dot_part_is_refused_before_it_reaches_another_route(
    client: PoimenClient, project: str, document_id: str
) -> None:
    # httpx resolves dot segments: `delete_document(p, "..")` went out as DELETE /v1/projects/p/ and
    # deleted the whole project.
    with pytest.raises(ValueError, match="part"):
        client.delete_document(project, document_id)
    with pytest.raises(ValueError, match="part"):
        client.get_document(project, document_id)

    assert client.project_stats(project).documents == len(NOTES)


def value_error_of(call: Callable[[], object]) -> str:
    """The message of the `ValueError` `call` raised; "no ValueError" if it returned."""
    try:
        call()
    except ValueError as error:
        return str(error)
    return "no ValueError"


ESCAPED_IDS = [
    "a/b/c.md",
    "100%.md",
    "100%25",
    "why?.md",
    "q?x=1&y=2",
    "#frag",
    "sp ace+plus",
    "caf\u00e9/\u65e5\u672c/\U0001f600",
]
"""Document ids a URL path must escape (`%`, `?`, `#`, space, non-ASCII), and `/`, which the path keeps."""


def test_ids_a_url_must_escape_round_trip_through_every_document_call(client: PoimenClient, unique_name: str) -> None:
    client.ingest(
        unique_name, [Document(id=document_id, text=f"# Note\n\nAbout {document_id}.") for document_id in ESCAPED_IDS]
    )

    read = [client.get_document(unique_name, document_id).id for document_id in ESCAPED_IDS]
    listed = client.list_documents(unique_name).items
    for document_id in ESCAPED_IDS:
        client.delete_document(unique_name, document_id)

    assert read == ESCAPED_IDS
    assert sorted(item.id for item in listed) == sorted(ESCAPED_IDS)
    assert client.list_documents(unique_name).items == []


@pytest.mark.parametrize("bad_project", ["team/notes", "a b", "x" * 65, "caf\u00e9", "."])
def test_a_project_id_outside_the_services_rule_is_refused_before_sending(
    client: PoimenClient, project: str, bad_project: str
) -> None:
    # `team/notes` went out as /v1/projects/team%2Fnotes and came back a 404, read as "no such document".
    calls = {
        "ingest": lambda: client.ingest(bad_project, NOTES[0]),
        "get_document": lambda: client.get_document(bad_project, "k8s/ports.md"),
        "project_stats": lambda: client.project_stats(bad_project),
        "delete_project": lambda: client.delete_project(bad_project),
        "search": lambda: client.search(bad_project, "port"),
        "memory_query": lambda: client.memory_query(bad_project, "port"),
    }

    refusals = {name: value_error_of(call) for name, call in calls.items()}

    assert all(PROJECT_ID_RULE in refusal for refusal in refusals.values()), refusals
    assert client.project_stats(project).documents == len(NOTES)


@pytest.mark.parametrize(
    ("method", "arguments", "message"),
    [
        ("get_document", (None,), "document_id must be a str, got NoneType"),
        ("delete_document", (7,), "document_id must be a str, got int"),
        ("search", (None,), "a query must be a str or a SearchQuery, got NoneType"),
        ("memory_query", ({"query": "q"},), "a query must be a str or a SearchQuery, got dict"),
        ("search_batch", (["port", None],), "a query must be a str or a SearchQuery, got NoneType"),
    ],
)
def test_a_document_id_or_query_of_another_type_is_a_type_error(
    client: PoimenClient, unique_name: str, method: str, arguments: tuple[object, ...], message: str
) -> None:
    # An untyped caller's None was an AttributeError ('NoneType' object has no attribute 'split').
    with pytest.raises(TypeError, match=re.escape(message)):
        getattr(client, method)(unique_name, *arguments)


def test_search_batch_refuses_one_string_for_its_queries(client: PoimenClient, project: str) -> None:
    with pytest.raises(TypeError, match="queries"):
        client.search_batch(project, "port")  # a str is a sequence of one-letter queries


def test_search_applies_filters(client: PoimenClient, project: str) -> None:
    query = SearchQuery(query="how long to cook", filters=SearchFilters(tags=["food"]), strategy="semantic")

    answer = client.search(project, query)

    assert {hit.document_id for hit in answer.results} == {"cooking/bread.md", "cooking/soup.md"}


def test_memory_query_pages_follow_the_cursor_without_repeats(client: PoimenClient, project: str) -> None:
    first = client.memory_query(project, SearchQuery(query="notes", strategy="semantic", limit=2, offset=0))
    assert first.next_cursor is not None
    second = client.memory_query(
        project, SearchQuery(query="notes", strategy="semantic", limit=2, cursor=first.next_cursor)
    )

    ids = [hit.id for hit in first.results + second.results]
    assert len(ids) == len(set(ids)) == 4
    assert [hit.rank for hit in second.results] == [3, 4]


NAIVE_AS_OF = datetime(2023, 6, 15, 12)  # noqa: DTZ001 - the client reads a time without a zone as UTC
TOKYO_AS_OF = datetime(2023, 6, 15, 21, tzinfo=timezone(timedelta(hours=9)))


@pytest.mark.parametrize(
    ("as_of", "monday_utc"),
    [(NAIVE_AS_OF, datetime(2023, 6, 5, tzinfo=UTC)), (TOKYO_AS_OF, datetime(2023, 6, 4, 15, tzinfo=UTC))],
)
def test_as_of_resolves_last_week_on_both_search_endpoints(
    client: PoimenClient, project: str, as_of: datetime, monday_utc: datetime
) -> None:
    query = SearchQuery(query="notes of last week", explain=True, as_of=as_of)

    answers = [client.memory_query(project, query), client.search(project, query)]

    # Tokyo's last week began at midnight on Monday 5 June there: 15:00 UTC on the 4th.
    ranges = [(a.query_analysis.event_time_from, a.query_analysis.event_time_to) for a in answers if a.query_analysis]
    assert ranges == [(monday_utc, monday_utc + timedelta(days=7))] * 2


def test_memory_query_refuses_options_only_search_takes(client: PoimenClient) -> None:
    with pytest.raises(ValueError, match="filters"):
        client.memory_query("p", SearchQuery(query="q", filters=SearchFilters(tags=["x"])))


def test_search_batch_answers_each_query_in_order(client: PoimenClient, project: str) -> None:
    answer = client.search_batch(
        project, ["sourdough starter", SearchQuery(query="night train", strategy="semantic", limit=1)]
    )

    assert [response.query for response in answer.results] == ["sourdough starter", "night train"]
    assert answer.results[1].results[0].document_id == "travel/rail.md"


def test_iter_documents_reads_every_document_of_the_live_listing(client: PoimenClient, project: str) -> None:
    ids = [item.id for item in client.iter_documents(project, where=DocumentFilter(tag="ops"), page_size=1)]

    assert ids == ["k8s/dns.md", "k8s/ports.md"]


def test_list_documents_pages_until_next_cursor_is_none(client: PoimenClient, project: str) -> None:
    pages = [client.list_documents(project, limit=2)]
    while pages[-1].next_cursor is not None:
        pages.append(client.list_documents(project, limit=2, cursor=pages[-1].next_cursor))

    assert [item.id for page in pages for item in page.items] == sorted(document.id for document in NOTES)
    assert len(pages) == 3


def test_list_documents_filters_by_source_prefix(client: PoimenClient, project: str) -> None:
    page = client.list_documents(project, where=DocumentFilter(source_prefix="cooking/"))

    assert [item.id for item in page.items] == ["cooking/bread.md", "cooking/soup.md"]
    assert page.next_cursor is None


def test_delete_documents_removes_only_the_matching_ones(client: PoimenClient, project: str) -> None:
    deleted = client.delete_documents(project, DocumentFilter(source_prefix="k8s/"))

    assert deleted.deleted == 2
    assert client.project_stats(project).documents == 3


def test_stale_expected_version_raises_conflict_with_the_current_version(client: PoimenClient, project: str) -> None:
    stored = client.get_document(project, "travel/rail.md").version

    with pytest.raises(ConflictError) as raised:
        client.ingest(project, Document(id="travel/rail.md", text="# Rail\n\nChanged.", expected_version=stored + 7))

    assert raised.value.status == 409
    assert raised.value.current_version == stored
    assert raised.value.document_id == "travel/rail.md"
    assert f"current_version: {stored}" in str(raised.value)
    assert re.fullmatch(r"[0-9a-f]{32}", raised.value.request_id or "")  # what the service's log lines carry
    assert f"[request id: {raised.value.request_id}]" in str(raised.value)


def test_if_match_of_the_stored_version_writes_a_newer_one(client: PoimenClient, project: str) -> None:
    stored = client.get_document(project, "travel/rail.md").version

    answer = client.ingest(project, Document(id="travel/rail.md", text="# Rail\n\nAt eleven."), if_match=stored)

    assert answer.documents[0].version > stored


def test_if_match_any_version_updates_or_deletes_only_a_document_that_exists(
    client: PoimenClient, project: str
) -> None:
    with pytest.raises(ConflictError) as creating:
        client.ingest(project, Document(id="travel/none-yet.md", text="# None\n\nYet."), if_match="*")
    updated = client.ingest(project, Document(id="travel/rail.md", text="# Rail\n\nAt noon."), if_match="*")
    with pytest.raises(ConflictError):
        client.delete_document(project, "travel/none-yet.md", if_match="*")
    client.delete_document(project, "travel/rail.md", if_match="*")

    assert creating.value.document_id == "travel/none-yet.md"
    assert updated.documents[0].status == "updated"
    with pytest.raises(NotFoundError):
        client.get_document(project, "travel/rail.md")


def test_if_match_takes_the_etag_the_service_sent_pending_or_not(client: PoimenClient, project: str) -> None:
    # The service's ETag is `"<version>-pending"` until the lexical index has the document; either is a version.
    stored = client.get_document(project, "travel/rail.md").version

    answer = client.ingest(
        project, Document(id="travel/rail.md", text="# Rail\n\nAt one."), if_match=f'"{stored}-pending"'
    )
    client.delete_document(project, "travel/rail.md", if_match=f'"{answer.documents[0].version}"')

    with pytest.raises(NotFoundError):
        client.get_document(project, "travel/rail.md")


def test_delete_document_with_a_stale_if_match_raises_conflict(client: PoimenClient, project: str) -> None:
    stored = client.get_document(project, "travel/rail.md").version
    with pytest.raises(ConflictError):
        client.delete_document(project, "travel/rail.md", if_match=stored + 5)

    client.delete_document(project, "travel/rail.md", if_match=stored)

    with pytest.raises(NotFoundError):
        client.get_document(project, "travel/rail.md")


def test_missing_document_raises_not_found_naming_the_request(client: PoimenClient, unique_name: str) -> None:
    with pytest.raises(NotFoundError) as raised:
        client.get_document(unique_name, "nothing-here")

    assert raised.value.status == 404
    assert f"/v1/projects/{unique_name}/documents/nothing-here" in str(raised.value)


def test_out_of_range_limit_raises_invalid_request_naming_the_field(client: PoimenClient, unique_name: str) -> None:
    with pytest.raises(InvalidRequestError) as raised:
        client.search(unique_name, SearchQuery(query="q", limit=1000))

    assert raised.value.field == "limit"
    assert "[field: limit]" in str(raised.value)


def test_malformed_cursor_raises_invalid_request_naming_cursor(client: PoimenClient, unique_name: str) -> None:
    with pytest.raises(InvalidRequestError) as raised:
        client.list_documents(unique_name, cursor="not-a-cursor")

    assert raised.value.field == "cursor"


def test_list_projects_pages_until_next_cursor_is_none(client: PoimenClient, project: str) -> None:
    pages = [client.list_projects(limit=1)]
    while pages[-1].next_cursor is not None:
        pages.append(client.list_projects(limit=1, cursor=pages[-1].next_cursor))

    listed = [item.project for page in pages for item in page.items]
    assert project in listed
    assert listed == sorted(set(listed))
    assert all(len(page.items) == 1 for page in pages)


def test_project_stats_count_documents_and_chunks(client: PoimenClient, project: str) -> None:
    stats = client.project_stats(project)

    assert (stats.project, stats.documents, stats.chunks) == (project, 5, 5)
    assert stats.last_write_at is not None


def test_delete_project_removes_every_document(client: PoimenClient, project: str) -> None:
    deleted = client.delete_project(project)

    assert deleted.deleted == 5
    assert client.project_stats(project).documents == 0


def test_reindex_queues_every_document(client: PoimenClient, project: str) -> None:
    assert client.reindex(project).queued_documents == 5


def test_flags_name_each_value_and_its_source(client: PoimenClient) -> None:
    flags = client.flags()

    assert flags
    assert isinstance(flags, dict)


def test_probes_answer_live_and_ready(client: PoimenClient) -> None:
    assert client.liveness().status == "ok"
    readiness = client.readiness()
    assert readiness.status == "ready"
    assert set(readiness.checks) >= {"store", "vector", "lexical", "model"}


def test_metrics_are_prometheus_text(client: PoimenClient) -> None:
    assert "# TYPE" in client.metrics()


def test_the_readme_example_runs_against_the_live_service(service_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    first_line = "from poimen_client.clients import PoimenClient\n"
    example = first_line + readme.split("```python\n" + first_line, 1)[1].split("```", 1)[0]
    assert len([line for line in example.splitlines() if line.strip()]) == 5

    code = compile(example.replace("http://127.0.0.1:8080", service_url), "README.md", "exec")
    exec(code, {})  # noqa: S102 - the README's own example

    assert "(1, 'runbook-1')" in capsys.readouterr().out


def test_headers_over_the_services_limit_are_a_payload_too_large_error(service_url: str) -> None:
    # The service answers 431 from its HTTP layer; the client had no class for it (a bare ServiceError).
    with (
        PoimenClient(service_url, headers={"X-Padding": "x" * 70_000}) as padded,
        pytest.raises(PayloadTooLargeError) as refused,
    ):
        padded.list_projects()

    assert refused.value.status == 431
