"""Golden tests: the exact OpenSearch request bodies, and parsing of documented response shapes. No server."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from opensearchpy.exceptions import (
    AuthenticationException,
    ConnectionTimeout,
    RequestError,
    TransportError,
)
from opensearchpy.exceptions import (
    ConnectionError as OpenSearchConnectionError,
)

from app.domain.errors import EngineRejectedError, EngineTimeoutError, EngineUnavailableError
from app.domain.models import Chunk, DocumentChunks, Filters, LexicalQuery
from app.domain.text_forms import DIACRITICS, FOLDED_LETTERS, FORMAT_CHARACTERS, SOUTH_EAST_ASIAN_LETTERS
from app.engines.opensearch_bodies import (
    MAX_QUERY_TOKENS,
    SEARCH_FIELDS,
    build_bulk_actions,
    build_search_body,
    build_stale_chunks_query,
    document_key,
    latest_per_document,
    within_clause_budget,
)
from app.engines.opensearch_mapping import SCHEMA_VERSION, index_body, versioned_index_name
from app.engines.opensearch_responses import (
    parse_search_response,
    raise_for_bulk_failures,
    raise_for_by_query_failures,
    split_version_conflicts,
    translate_error,
)

SOURCE_FIELDS = [
    "chunk_id",
    "document_id",
    "project_id",
    "content",
    "source",
    "level",
    "breadcrumb",
    "section_title",
    "position",
    "tags",
    "event_time",
    "chunk_hash",
]


def make_chunk(chunk_id: str, **overrides: object) -> Chunk:
    values: dict[str, object] = {
        "chunk_id": chunk_id,
        "document_id": "doc-1",
        "project_id": "poimen",
        "text": "Restart the kubernetes pod on port 8080.",
        "source": "runbooks/k8s.md",
        "level": "L1",
        "breadcrumb": ("Runbooks", "Kubernetes"),
        "section_title": "Restarting pods",
        "position": 0,
    }
    values.update(overrides)
    return Chunk(**values)  # type: ignore[arg-type]


# --- index mapping ------------------------------------------------------------------------------


def test_index_body_is_the_pinned_mapping() -> None:
    body = index_body(shards=2, replicas=1)

    assert body == {
        "settings": {
            "number_of_shards": 2,
            "number_of_replicas": 1,
            "index.codec": "best_compression",
            "analysis": {
                "char_filter": {
                    "word_joiners_as_space": {"type": "pattern_replace", "pattern": "[:.,;_]", "replacement": " "},
                    "format_characters_dropped": {
                        "type": "pattern_replace",
                        "pattern": f"[{FORMAT_CHARACTERS}]",
                        "replacement": "",
                    },
                    "dotted_capital_i": {"type": "pattern_replace", "pattern": "\u0130", "replacement": "I"},
                    "diacritics_dropped": {"type": "pattern_replace", "pattern": f"[{DIACRITICS}]", "replacement": ""},
                    **{
                        f"folded_as_{ord(plain):04x}": {
                            "type": "pattern_replace",
                            "pattern": f"[{letters}]",
                            "replacement": plain,
                        }
                        for plain, letters in FOLDED_LETTERS.items()
                    },
                    "south_east_asian_spaced": {
                        "type": "pattern_replace",
                        "pattern": f"([{SOUTH_EAST_ASIAN_LETTERS}])",
                        "replacement": " $1",
                    },
                },
                "filter": {
                    "final_sigma": {"type": "pattern_replace", "pattern": "\u03c2", "replacement": "\u03c3"},
                    "english_stop": {"type": "stop", "stopwords": "_english_"},
                    "english_stemmer": {"type": "stemmer", "language": "english"},
                },
                "analyzer": {
                    "english_folded": {
                        "type": "custom",
                        "char_filter": [
                            *("word_joiners_as_space", "format_characters_dropped", "dotted_capital_i"),
                            "diacritics_dropped",
                            *(f"folded_as_{ord(plain):04x}" for plain in FOLDED_LETTERS),
                            "south_east_asian_spaced",
                        ],
                        "tokenizer": "standard",
                        "filter": [
                            *("apostrophe", "lowercase", "final_sigma", "asciifolding"),
                            *("english_stop", "english_stemmer"),
                        ],
                    },
                    "ngram_analyzer": {"type": "custom", "tokenizer": "ngram_tokenizer", "filter": ["lowercase"]},
                },
                "normalizer": {"tag_key": {"type": "custom", "filter": ["lowercase"]}},
                "tokenizer": {
                    "ngram_tokenizer": {
                        "type": "ngram",
                        "min_gram": 3,
                        "max_gram": 4,
                        "token_chars": ["letter", "digit"],
                    },
                },
            },
        },
        "mappings": {
            "dynamic": "strict",
            "_meta": {"schema_version": SCHEMA_VERSION},
            "properties": {
                "chunk_id": {"type": "keyword"},
                "document_id": {"type": "keyword"},
                "project_id": {"type": "keyword"},
                "content": {
                    "type": "text",
                    "analyzer": "english_folded",
                    "fields": {
                        "raw": {"type": "keyword", "ignore_above": 8191},
                        "ngram": {"type": "text", "analyzer": "ngram_analyzer"},
                    },
                },
                "titled_content": {"type": "text", "analyzer": "english_folded"},
                "section_title": {"type": "text", "analyzer": "english_folded"},
                "breadcrumb": {
                    "type": "text",
                    "analyzer": "english_folded",
                    "fields": {"raw": {"type": "keyword", "ignore_above": 1024}},
                },
                "source": {
                    "type": "text",
                    "analyzer": "english_folded",
                    "fields": {"raw": {"type": "keyword", "ignore_above": 1024}},
                },
                "tags": {
                    "type": "keyword",
                    "fields": {
                        "text": {"type": "text", "analyzer": "english_folded"},
                        "key": {"type": "keyword", "normalizer": "tag_key"},
                    },
                },
                "context": {"type": "text", "analyzer": "english_folded"},
                "level": {"type": "keyword"},
                "position": {"type": "integer"},
                "chunk_hash": {"type": "keyword", "index": False},
                "event_time": {"type": "date"},
                "indexed_at": {"type": "date"},
                "outbox_version": {"type": "long"},
                "marker_project_id": {"type": "keyword"},
                "marker_document_id": {"type": "keyword"},
            },
        },
    }


def test_index_body_covers_every_field_of_the_reference_mapping() -> None:
    # hybrid-search-design.md §2.2: these fields, the ngram analyzer (3-4 grams), content sub-fields.
    reference_fields = {
        "content",
        "source",
        "breadcrumb",
        "level",
        "section_title",
        "document_id",
        "project_id",
        "indexed_at",
    }
    issue_fields = {"tags", "event_time", "chunk_id"}

    body = index_body()

    properties = body["mappings"]["properties"]
    assert reference_fields | issue_fields <= properties.keys()
    assert set(properties["content"]["fields"]) == {"raw", "ngram"}
    assert properties["content"]["fields"]["raw"]["type"] == "keyword"
    assert body["settings"]["analysis"]["tokenizer"]["ngram_tokenizer"]["min_gram"] == 3
    assert body["settings"]["analysis"]["tokenizer"]["ngram_tokenizer"]["max_gram"] == 4
    assert {properties[name]["type"] for name in ("level", "document_id", "project_id", "tags")} == {"keyword"}
    assert properties["event_time"]["type"] == properties["indexed_at"]["type"] == "date"


def test_index_body_takes_shards_and_replicas_from_arguments() -> None:
    body = index_body(shards=5, replicas=0)

    assert (body["settings"]["number_of_shards"], body["settings"]["number_of_replicas"]) == (5, 0)


def test_versioned_index_name_appends_the_schema_version() -> None:
    assert versioned_index_name("poimen-chunks") == f"poimen-chunks_-v{SCHEMA_VERSION}"
    assert versioned_index_name("poimen-chunks", 7) == "poimen-chunks-v7"  # the names of older versions stay


# --- search body --------------------------------------------------------------------------------


def test_search_body_with_every_structure_element() -> None:
    query = LexicalQuery(
        text="fix kubernetes port 8080",
        phrases=("port 8080",),
        excluded_terms=("docker", "helm chart"),
        fuzzy=True,
    )
    filters = Filters(
        project_id="poimen",
        levels=("L0", "L1"),
        tags=("K8s", "ops", "k8s"),  # filtered by their keys, once each
        source_prefix="runbooks/",
        event_time_from=datetime(2024, 1, 1, tzinfo=UTC),
        event_time_to=datetime(2025, 1, 1, tzinfo=UTC),
        chunk_ids=("c2", "c1"),
    )

    body = build_search_body(query, top_k=50, filters=filters)

    assert body == {
        "size": 50,
        "query": {
            "bool": {
                "must": [
                    {
                        "multi_match": {
                            "query": "fix kubernetes port 8080",
                            "fields": [
                                "titled_content^2",
                                "source",
                                "tags.text",
                                "context^1",
                            ],
                            "type": "best_fields",
                            "operator": "or",
                            "fuzziness": "AUTO",
                            "max_expansions": 50,
                        }
                    },
                    {"match_phrase": {"titled_content": {"query": "port 8080", "boost": 2.0}}},
                ],
                "filter": [
                    {"term": {"project_id": "poimen"}},
                    {"terms": {"level": ["L0", "L1"]}},
                    {"term": {"tags.key": "k8s"}},
                    {"term": {"tags.key": "ops"}},
                    {"prefix": {"source.raw": "runbooks/"}},
                    {"range": {"event_time": {"gte": "2024-01-01T00:00:00+00:00", "lt": "2025-01-01T00:00:00+00:00"}}},
                    {"terms": {"chunk_id": ["c1", "c2"]}},
                ],
                "must_not": [
                    {
                        "multi_match": {
                            "query": "docker",
                            "fields": ["titled_content", "source", "tags.text"],
                            "type": "phrase",
                        }
                    },
                    {
                        "multi_match": {
                            "query": "helm chart",
                            "fields": ["titled_content", "source", "tags.text"],
                            "type": "phrase",
                        }
                    },
                ],
            }
        },
        "sort": [{"_score": {"order": "desc"}}, {"chunk_id": {"order": "asc"}}],
        "track_total_hits": False,
        "_source": SOURCE_FIELDS,
    }


def test_search_body_without_fuzzy_has_no_fuzziness_and_only_the_project_filter() -> None:
    body = build_search_body(LexicalQuery(text="kubernetes"), top_k=10, filters=Filters(project_id="poimen"))

    assert body["query"] == {
        "bool": {
            "must": [
                {
                    "multi_match": {
                        "query": "kubernetes",
                        "fields": [
                            "titled_content^2",
                            "source",
                            "tags.text",
                            "context^1",
                        ],
                        "type": "best_fields",
                        "operator": "or",
                    }
                }
            ],
            "filter": [{"term": {"project_id": "poimen"}}],
        }
    }


def test_search_body_with_only_a_phrase_has_no_free_text_clause() -> None:
    body = build_search_body(LexicalQuery(text="  ", phrases=("exit code 137",)), top_k=5, filters=Filters("p"))

    assert body["query"]["bool"]["must"] == [
        {"match_phrase": {"titled_content": {"query": "exit code 137", "boost": 2.0}}}
    ]


def test_search_body_with_a_half_open_date_range_sends_one_bound() -> None:
    filters = Filters("p", event_time_to=datetime(2024, 6, 1, 12, 30, tzinfo=UTC))

    body = build_search_body(LexicalQuery("x"), top_k=5, filters=filters)

    assert body["query"]["bool"]["filter"][1] == {"range": {"event_time": {"lt": "2024-06-01T12:30:00+00:00"}}}


def test_search_body_with_include_undated_also_admits_chunks_without_an_event_time() -> None:
    filters = Filters("p", event_time_from=datetime(2024, 1, 1, tzinfo=UTC), include_undated=True)

    body = build_search_body(LexicalQuery("x"), top_k=5, filters=filters)

    assert body["query"]["bool"]["filter"][1] == {
        "bool": {
            "should": [
                {"range": {"event_time": {"gte": "2024-01-01T00:00:00+00:00"}}},
                {"bool": {"must_not": [{"exists": {"field": "event_time"}}]}},
            ],
            "minimum_should_match": 1,
        }
    }


def test_search_body_keeps_query_syntax_as_plain_text() -> None:
    text = 'title:(foo* "bar~ AND'

    body = build_search_body(LexicalQuery(text), top_k=5, filters=Filters("p"))

    # multi_match analyzes text as words; query_string, which would parse it, is never used.
    assert body["query"]["bool"]["must"][0]["multi_match"]["query"] == text
    assert "query_string" not in repr(body)


def test_search_body_deduplicates_tags_and_phrases() -> None:
    body = build_search_body(LexicalQuery("a", phrases=("b c", "b c")), top_k=5, filters=Filters("p", tags=("x", "X")))

    assert body["query"]["bool"]["filter"] == [{"term": {"project_id": "p"}}, {"term": {"tags.key": "x"}}]
    assert len(body["query"]["bool"]["must"]) == 2


# --- write bodies -------------------------------------------------------------------------------


def test_bulk_actions_index_every_chunk_under_a_project_qualified_id() -> None:
    chunk = make_chunk("c1", tags=("k8s",), event_time=datetime(2024, 3, 1, 8, 0, tzinfo=UTC), chunk_hash="abc")
    indexed_at = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)

    actions = build_bulk_actions(
        [DocumentChunks("poimen", "doc-1", (chunk,)), DocumentChunks("poimen", "gone", ())],
        index_of=lambda project_id: f"poimen-chunks-p-{project_id}",
        indexed_at=indexed_at,
    )

    assert actions == [
        {
            "_op_type": "index",
            "_index": "poimen-chunks-p-poimen",
            "_id": "poimen:c1",
            "_source": {
                "chunk_id": "c1",
                "document_id": "doc-1",
                "project_id": "poimen",
                "content": "Restart the kubernetes pod on port 8080.",
                "titled_content": "Runbooks > Kubernetes\nRestart the kubernetes pod on port 8080.",
                "source": "runbooks/k8s.md",
                "level": "L1",
                "breadcrumb": ["Runbooks", "Kubernetes"],
                "section_title": "Restarting pods",
                "position": 0,
                "tags": ["k8s"],
                "event_time": "2024-03-01T08:00:00+00:00",
                "chunk_hash": "abc",
                "context": "",
                "indexed_at": "2025-01-02T03:04:05+00:00",
            },
        }
    ]


def test_bulk_actions_give_each_chunk_its_own_context_only() -> None:
    first = make_chunk("c1", text="Zookeeper keeps a quorum.", position=0, context="Asked: what keeps state?")
    second = make_chunk("c2", text="Restart the leader last.", position=1)
    indexed_at = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)

    actions = build_bulk_actions(
        [DocumentChunks("poimen", "doc-1", (first, second))], index_of=lambda _: "i", indexed_at=indexed_at
    )

    assert [action["_source"]["context"] for action in actions] == ["Asked: what keeps state?", ""]


def test_latest_per_document_keeps_the_last_entry_of_each_document() -> None:
    older = DocumentChunks("poimen", "doc-1", (make_chunk("c1"),))
    other = DocumentChunks("other", "doc-1", ())
    newer = DocumentChunks("poimen", "doc-1", (make_chunk("c2"),))

    assert latest_per_document([older, other, newer]) == [newer, other]


def test_latest_per_document_keeps_the_highest_outbox_version_wherever_it_is_listed() -> None:
    newer = DocumentChunks("poimen", "doc-1", (make_chunk("c2"),), outbox_version=6)
    older = DocumentChunks("poimen", "doc-1", (make_chunk("c1"),), outbox_version=5)

    assert latest_per_document([newer, older]) == [newer]


def test_bulk_actions_of_a_versioned_document_use_external_gte_and_store_the_version() -> None:
    indexed_at = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)

    actions = build_bulk_actions(
        [DocumentChunks("poimen", "doc-1", (make_chunk("c1"),), outbox_version=42)],
        index_of=lambda _: "i",
        indexed_at=indexed_at,
    )

    assert [(action["version"], action["version_type"]) for action in actions] == [(42, "external_gte")]
    assert actions[0]["_source"]["outbox_version"] == 42


def test_bulk_actions_of_an_unversioned_document_carry_no_version() -> None:
    indexed_at = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)

    actions = build_bulk_actions(
        [DocumentChunks("poimen", "doc-1", (make_chunk("c1"),))], index_of=lambda _: "i", indexed_at=indexed_at
    )

    assert "version" not in actions[0]
    assert "version_type" not in actions[0]
    assert "outbox_version" not in actions[0]["_source"]


def test_document_key_separates_projects() -> None:
    assert document_key("a", "c1") != document_key("b", "c1")


def test_stale_chunks_query_keeps_listed_chunks_and_deletes_emptied_documents() -> None:
    documents = [
        DocumentChunks("poimen", "doc-1", (make_chunk("c2"), make_chunk("c1"))),
        DocumentChunks("poimen", "gone", ()),
    ]

    body = build_stale_chunks_query(documents)

    assert body == {
        "query": {
            "bool": {
                "should": [
                    {
                        "bool": {
                            "filter": [{"term": {"project_id": "poimen"}}, {"term": {"document_id": "doc-1"}}],
                            "must_not": [{"terms": {"chunk_id": ["c1", "c2"]}}],
                        }
                    },
                    {"bool": {"filter": [{"term": {"project_id": "poimen"}}, {"term": {"document_id": "gone"}}]}},
                ],
                "minimum_should_match": 1,
            }
        }
    }


OLDER_THAN_7 = {
    "bool": {
        "should": [
            {"range": {"outbox_version": {"lt": 7}}},
            {"bool": {"must_not": [{"exists": {"field": "outbox_version"}}]}},
        ],
        "minimum_should_match": 1,
    }
}


def test_stale_chunks_query_of_a_versioned_document_matches_only_older_or_unversioned_chunks() -> None:
    documents = [DocumentChunks("poimen", "doc-1", (make_chunk("c1"),), outbox_version=7)]

    body = build_stale_chunks_query(documents)

    assert body["query"]["bool"]["should"] == [
        {
            "bool": {
                "filter": [{"term": {"project_id": "poimen"}}, {"term": {"document_id": "doc-1"}}, OLDER_THAN_7],
                "must_not": [{"terms": {"chunk_id": ["c1"]}}],
            }
        }
    ]


def test_stale_chunks_query_of_a_superseded_document_matches_all_its_chunks_up_to_its_version() -> None:
    documents = [DocumentChunks("poimen", "doc-1", (make_chunk("c1"),), outbox_version=7)]

    body = build_stale_chunks_query(documents, superseded=frozenset({("poimen", "doc-1")}))

    up_to_7 = {
        "bool": {
            "should": [
                {"range": {"outbox_version": {"lte": 7}}},
                {"bool": {"must_not": [{"exists": {"field": "outbox_version"}}]}},
            ],
            "minimum_should_match": 1,
        }
    }
    assert body["query"]["bool"]["should"] == [
        {"bool": {"filter": [{"term": {"project_id": "poimen"}}, {"term": {"document_id": "doc-1"}}, up_to_7]}}
    ]


# --- response parsing ---------------------------------------------------------------------------


def search_response(**overrides: object) -> dict[str, object]:
    """A `_search` response in the documented shape (OpenSearch 2.x/3.x REST reference)."""
    response: dict[str, object] = {
        "took": 3,
        "timed_out": False,
        "_shards": {"total": 2, "successful": 2, "skipped": 0, "failed": 0},
        "hits": {
            "max_score": None,
            "hits": [
                {
                    "_index": "poimen-chunks-v1",
                    "_id": "poimen:c1",
                    "_score": 7.25,
                    "_source": {
                        "chunk_id": "c1",
                        "document_id": "doc-1",
                        "project_id": "poimen",
                        "content": "Restart the kubernetes pod.",
                        "source": "runbooks/k8s.md",
                        "level": "L1",
                        "breadcrumb": ["Runbooks", "Kubernetes"],
                        "section_title": "Restarting pods",
                        "position": 3,
                        "tags": ["k8s", "ops"],
                        "event_time": "2024-03-01T08:00:00+00:00",
                        "chunk_hash": "abc",
                    },
                    "sort": [7.25, "c1"],
                },
                {
                    "_index": "poimen-chunks-v1",
                    "_id": "poimen:c2",
                    "_score": 1.5,
                    "_source": {
                        "chunk_id": "c2",
                        "document_id": "doc-2",
                        "project_id": "poimen",
                        "content": "Other.",
                        "source": "notes/x.md",
                        "level": "L2",
                        "breadcrumb": [],
                        "section_title": "",
                        "position": 0,
                        "tags": [],
                        "event_time": None,
                        "chunk_hash": "",
                    },
                    "sort": [1.5, "c2"],
                },
            ],
        },
    }
    response.update(overrides)
    return response


def test_parse_search_response_rebuilds_chunks_best_first() -> None:
    hits = parse_search_response(search_response())

    assert [(hit.chunk_id, hit.score) for hit in hits] == [("c1", 7.25), ("c2", 1.5)]
    assert hits[0].chunk == make_chunk(
        "c1",
        text="Restart the kubernetes pod.",
        position=3,
        tags=("k8s", "ops"),
        event_time=datetime(2024, 3, 1, 8, 0, tzinfo=UTC),
        chunk_hash="abc",
    )
    assert hits[1].chunk.event_time is None
    assert hits[1].chunk.breadcrumb == ()


def test_parse_search_response_of_no_hits_is_empty() -> None:
    assert parse_search_response(search_response(hits={"max_score": None, "hits": []})) == []


def test_parse_search_response_refuses_partial_results_after_a_cluster_timeout() -> None:
    with pytest.raises(EngineTimeoutError) as caught:
        parse_search_response(search_response(timed_out=True))

    assert caught.value.engine == "opensearch"


def test_parse_search_response_refuses_results_with_failed_shards() -> None:
    shards = {
        "total": 2,
        "successful": 1,
        "skipped": 0,
        "failed": 1,
        "failures": [
            {
                "shard": 1,
                "index": "poimen-chunks-v1",
                "node": "n1",
                "reason": {"type": "node_not_connected_exception", "reason": "[n1] Node not connected"},
            }
        ],
    }

    with pytest.raises(EngineUnavailableError, match="1 of 2 shards: node_not_connected_exception"):
        parse_search_response(search_response(_shards=shards))


def test_bulk_items_all_refused_as_sent_are_a_rejection_and_any_load_shed_makes_it_an_outage() -> None:
    refused = {"index": {"_id": "p:c1", "status": 400, "error": {"type": "action_request_validation_exception"}}}
    shed = {"index": {"_id": "p:c2", "status": 429, "error": {"type": "rejected_execution_exception"}}}

    with pytest.raises(EngineRejectedError):
        raise_for_bulk_failures([refused], attempted=3)
    with pytest.raises(EngineUnavailableError) as caught:
        raise_for_bulk_failures([refused, shed], attempted=3)

    assert not isinstance(caught.value, EngineRejectedError)  # the outbox gives the whole batch back


def test_bulk_item_failures_raise_so_the_outbox_retries() -> None:
    # Items as `_bulk` returns them when `errors: true` (one mapping error, one 429 rejection).
    failed = [
        {
            "index": {
                "_index": "poimen-chunks-v1",
                "_id": "poimen:c1",
                "status": 400,
                "error": {"type": "mapper_parsing_exception", "reason": "failed to parse field [event_time]"},
            }
        },
        {
            "index": {
                "_index": "poimen-chunks-v1",
                "_id": "poimen:c2",
                "status": 429,
                "error": {
                    "type": "rejected_execution_exception",
                    "reason": "rejected execution of coordinating operation",
                },
            }
        },
    ]

    with pytest.raises(EngineUnavailableError) as caught:
        raise_for_bulk_failures(failed, attempted=5)

    assert (
        caught.value.message
        == "2 of 5 bulk items failed (status [400, 429]): mapper_parsing_exception: failed to parse field [event_time]"
    )


def test_version_conflicts_are_split_from_real_bulk_failures() -> None:
    conflict = {
        "index": {
            "_index": "poimen-chunks-v5",
            "_id": "poimen:c1",
            "status": 409,
            "error": {
                "type": "version_conflict_engine_exception",
                "reason": "[poimen:c1]: version conflict, current version [6] is higher than or equal to [5]",
            },
        }
    }
    rejected = {
        "index": {
            "_index": "poimen-chunks-v5",
            "_id": "poimen:c2",
            "status": 429,
            "error": {"type": "rejected_execution_exception", "reason": "rejected execution"},
        }
    }

    conflicted, failures = split_version_conflicts([conflict, rejected])

    assert conflicted == ["poimen:c1"]
    assert failures == [rejected]


def test_no_bulk_item_failures_raise_nothing() -> None:
    raise_for_bulk_failures([], attempted=5)


def test_delete_by_query_failures_raise() -> None:
    response = {
        "took": 10,
        "timed_out": False,
        "total": 3,
        "deleted": 2,
        "version_conflicts": 0,
        "failures": [
            {
                "index": "poimen-chunks-v1",
                "id": "poimen:c1",
                "cause": {"type": "es_rejected_execution_exception", "reason": "rejected"},
                "status": 429,
            }
        ],
    }

    with pytest.raises(EngineUnavailableError, match="1 failures: es_rejected_execution_exception: rejected"):
        raise_for_by_query_failures(response)


def test_delete_by_query_timeout_raises_a_timeout() -> None:
    with pytest.raises(EngineTimeoutError):
        raise_for_by_query_failures({"timed_out": True, "deleted": 0, "failures": []})


def test_clean_delete_by_query_raises_nothing() -> None:
    raise_for_by_query_failures({"timed_out": False, "deleted": 4, "failures": []})


# --- error translation --------------------------------------------------------------------------

TOO_MANY_REQUESTS_BODY = {
    "error": {
        "root_cause": [{"type": "rejected_execution_exception", "reason": "rejected execution of search"}],
        "type": "rejected_execution_exception",
        "reason": "rejected execution of search",
    },
    "status": 429,
}


@pytest.mark.parametrize(
    ("error", "expected_type", "expected_message"),
    [
        (
            ConnectionTimeout("TIMEOUT", "timed out", TimeoutError()),
            EngineTimeoutError,
            "opensearch did not answer within the request timeout",
        ),
        (
            OpenSearchConnectionError("N/A", "refused", OSError()),
            EngineUnavailableError,
            "opensearch unreachable: ConnectionError",
        ),
        (
            TransportError(429, "rejected_execution_exception", TOO_MANY_REQUESTS_BODY),
            EngineUnavailableError,
            "opensearch rejected the request: too many requests (429)",
        ),
        (TransportError(504, "gateway timeout", {}), EngineTimeoutError, "opensearch timed out (status 504)"),
        (
            RequestError(400, "search_phase_execution_exception", {}),
            EngineRejectedError,  # sent again, refused again: the outbox isolates it
            "opensearch refused the request (status 400: search_phase_execution_exception)",
        ),
        (
            TransportError(403, "cluster_block_exception", {}),  # a write-blocked index while it is upgraded
            EngineUnavailableError,
            "opensearch refused the request (status 403: cluster_block_exception)",
        ),
    ],
)
def test_translate_error_maps_driver_errors(error: Exception, expected_type: type, expected_message: str) -> None:
    translated = translate_error(error)

    assert type(translated) is expected_type
    assert translated.engine == "opensearch"
    assert translated.message == expected_message


def test_translated_auth_error_does_not_echo_the_response_body() -> None:
    secret = "eyJhbGciOiJIUzI1NiJ9.secret-token.signature"
    error = AuthenticationException(401, "security_exception", {"error": {"reason": f"bad token {secret}"}})

    translated = translate_error(error)

    assert secret not in translated.message
    assert translated.message == "opensearch refused the request (status 401: security_exception)"


def test_a_refusal_whose_body_names_no_error_type_is_cut_to_a_line() -> None:
    # A `_reindex` answering 409 for each of 50,000 conflicts: opensearch-py puts the whole body in `error`.
    body = {"failures": [{"id": f"c{n}", "status": 409} for n in range(50_000)]}
    error = TransportError(409, str(body), body)

    translated = translate_error(error)

    assert translated.message.startswith("opensearch refused the request (status 409: {'failures'")
    assert len(translated.message) < 400


def test_tags_are_searched_as_words_and_filtered_by_their_keys() -> None:
    tags = index_body()["mappings"]["properties"]["tags"]

    body = build_search_body(LexicalQuery("networking"), top_k=5, filters=Filters("p", tags=("Networking",)))

    # Version 1 had no `tags.text`, 2 no `context`, 3 no `titled_content`, 4 no `outbox_version`,
    # 5 no version markers, 6 was one index for every project, 7 no `tags.key`, 8 no ASCII folding, 9 kept
    # `a:b` one word and named its index like an alias could be, 10 kept `a.b` and `a_b` one word, 11 kept a
    # format character in a word and a final sigma apart, 12 kept Arabic and Hebrew diacritics and the Greek tonos,
    # 13 kept a run of Thai letters one word:
    # a project index of an older version is reindexed and its alias swapped by ensure_index; the shared one is
    # rebuilt from PostgreSQL.
    assert SCHEMA_VERSION == 14
    assert tags == {
        "type": "keyword",
        "fields": {
            "text": {"type": "text", "analyzer": "english_folded"},
            "key": {"type": "keyword", "normalizer": "tag_key"},
        },
    }
    assert "tags.text" in body["query"]["bool"]["must"][0]["multi_match"]["fields"]
    assert {"term": {"tags.key": "networking"}} in body["query"]["bool"]["filter"]


def test_a_long_query_sends_opensearch_the_most_frequent_words_within_its_clause_budget() -> None:
    words = [f"w{number}" for number in range(1000)]
    text = " ".join(["heron"] * 5 + ["stork"] * 3 + words)

    sent = build_search_body(LexicalQuery(text, weigh_repeats=True), top_k=5, filters=Filters("p"))
    query = sent["query"]["bool"]["must"][0]["multi_match"]["query"].split()

    # Each term is a clause per field: 200 terms x 4 fields stays under OpenSearch's 1,024 clauses.
    assert len(query) == MAX_QUERY_TOKENS
    assert len(query) * len(SEARCH_FIELDS) <= 1024 - 2 * 64
    assert query[:3] == ["heron", "stork", "w0"]  # each word once, the most frequent first
    assert query.count("heron") == 1  # the budget runs out before the repeats' rounds


@pytest.mark.parametrize(
    "text",
    [
        "\u6771" * 600,  # no spaces: each Han character is a term of its own
        " ".join("-".join(f"w{word}x{part}" for part in range(8)) for word in range(300)),  # 8 terms a word
        " ".join(f"error:code{number}" for number in range(300)),
    ],
)
def test_the_budget_counts_terms_as_opensearch_splits_them_not_words(text: str) -> None:
    sent = within_clause_budget(text)

    terms = [term for piece in sent.split() for term in re.findall(r"[^\W_]+", piece)]
    assert 0 < len(terms) <= MAX_QUERY_TOKENS


def test_within_the_budget_repeats_come_round_by_round_and_a_short_query_is_untouched() -> None:
    assert within_clause_budget("a a a b b c d", max_tokens=6) == "a b c d a b"
    assert within_clause_budget("cause of mortality", max_tokens=6) == "cause of mortality"
