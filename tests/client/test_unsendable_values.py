"""Values the client cannot send are refused before anything is sent, naming the field that holds them.

Against the scripted loopback server, which records every request that arrives: none may.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import pytest
from poimen_client.clients import AsyncPoimenClient, PoimenClient
from poimen_client.models import Document, DocumentFilter, FusionWeights, SearchFilters, SearchQuery

if TYPE_CHECKING:
    from collections.abc import Callable

    from tests.client.scripted_server import ScriptedServer

LONE = "\ud83d"  # half of a UTF-16 pair, as json.loads('"\\ud83d"') or a surrogateescape decode leaves in a str


def surrogate_refusal(field: str, index: int) -> str:
    return (
        f"{field} holds a surrogate code point (U+D83D at index {index}), which UTF-8 cannot encode: nothing was sent"
    )


@pytest.mark.parametrize(
    ("send", "field", "index"),
    [
        (lambda client: client.search("p", f"port {LONE}"), "query", 5),
        (lambda client: client.memory_query("p", SearchQuery(query=f"{LONE} port")), "query", 0),
        (lambda client: client.search_batch("p", ["port", f"dns{LONE}"]), "queries[1].query", 3),
        (lambda client: client.ingest("p", Document(id="d", text=f"ok {LONE}")), "text", 3),
        (
            lambda client: client.ingest("p", [Document(id="a", text="fine"), Document(id="b", text="t", title=LONE)]),
            "documents[1].title",
            0,
        ),
        (
            lambda client: client.ingest("p", Document(id="d", text="t", metadata={"notes": ["ok", f"a{LONE}"]})),
            "metadata.notes[1]",
            1,
        ),
        (lambda client: client.get_document("p", f"notes/{LONE}"), "document_id", 6),
        (lambda client: client.list_documents("p", where=DocumentFilter(source_prefix=f"x{LONE}")), "source_prefix", 1),
    ],
)
def test_a_surrogate_is_a_value_error_naming_its_field_and_nothing_is_sent(
    server: ScriptedServer, send: Callable[[PoimenClient], object], field: str, index: int
) -> None:
    # The codec's bare UnicodeEncodeError came up from deep in msgspec, httpx or urllib, naming no field.
    with PoimenClient(server.url) as client, pytest.raises(ValueError, match="UTF-8 cannot encode") as raised:
        send(client)

    assert not isinstance(raised.value, UnicodeError)
    assert str(raised.value) == surrogate_refusal(field, index)
    assert server.arrivals == []


def test_a_surrogate_in_a_metadata_key_names_the_key(server: ScriptedServer) -> None:
    with PoimenClient(server.url) as client, pytest.raises(ValueError, match="UTF-8 cannot encode") as raised:
        client.ingest("p", Document(id="d", text="t", metadata={f"k{LONE}": 1}))

    assert not isinstance(raised.value, UnicodeError)
    assert str(raised.value) == (
        "metadata has a key, 'k\\ud83d', holding a surrogate code point (U+D83D at index 1), "
        "which UTF-8 cannot encode: nothing was sent"
    )
    assert server.arrivals == []


async def test_the_async_client_refuses_a_surrogate_alike(server: ScriptedServer) -> None:
    async with AsyncPoimenClient(server.url) as client:
        with pytest.raises(ValueError, match=re.escape(surrogate_refusal("query", 0))):
            await client.search("p", LONE)

    assert server.arrivals == []


class Owner:
    """A value msgspec has no JSON form for."""


def unencodable(field: str, type_name: str) -> str:
    return (
        f"{field} is a value of type {type_name}, which has no JSON form "
        "(send a str, number, bool, None, list or dict): nothing was sent"
    )


@pytest.mark.parametrize(
    ("documents", "message"),
    [
        (Document(id="d", text="t", metadata={"ratio": 1j}), unencodable("metadata.ratio", "complex")),
        (Document(id="d", text="t", metadata={"a b": 1j}), unencodable("metadata['a b']", "complex")),
        (
            [Document(id="a", text="t"), Document(id="b", text="t", metadata={"owner": {"pets": [Owner()]}})],
            unencodable("documents[1].metadata.owner.pets[0]", f"{__name__}.Owner"),
        ),
        (
            Document(id="d", text="t", metadata={(1, 2): "x"}),
            (
                "metadata has a key of type tuple, (1, 2), which JSON cannot carry "
                "(keys are strings, or numbers sent as strings): nothing was sent"
            ),
        ),
    ],
)
def test_metadata_json_cannot_carry_is_a_type_error_naming_the_field_and_type(
    server: ScriptedServer, documents: Document | list[Document], message: str
) -> None:
    # msgspec's TypeError said only "Encoding objects of type complex is unsupported".
    with PoimenClient(server.url) as client, pytest.raises(TypeError) as raised:
        client.ingest("p", documents)

    assert str(raised.value) == message
    assert server.arrivals == []


def test_metadata_that_holds_itself_is_a_value_error_naming_the_cycle(server: ScriptedServer) -> None:
    # msgspec's RecursionError escaped the client.
    metadata: dict[str, object] = {"kind": "note"}
    metadata["self"] = metadata

    with PoimenClient(server.url) as client, pytest.raises(ValueError, match="cycle") as raised:
        client.ingest("p", Document(id="d", text="t", metadata=metadata))

    assert str(raised.value) == "metadata.self is metadata again, a cycle JSON cannot carry: nothing was sent"
    assert server.arrivals == []


@pytest.mark.parametrize(
    ("send", "error", "message"),
    [
        (
            lambda client: client.search("p", SearchQuery(query=123)),
            TypeError,
            "query must be str, got int: nothing was sent",
        ),
        (
            lambda client: client.search("p", SearchQuery(query="port", limit="10")),
            TypeError,
            "limit must be int | None, got str: nothing was sent",
        ),
        (
            lambda client: client.memory_query("p", SearchQuery(query="port", limit=True)),
            TypeError,
            "limit must be int | None, got bool: nothing was sent",
        ),
        (
            lambda client: client.search("p", SearchQuery(query="port", filters=SearchFilters(tags="ops"))),
            TypeError,
            "filters.tags must be list, got str: nothing was sent",
        ),
        (
            lambda client: client.search("p", SearchQuery(query="port", filters=SearchFilters(tags=["ops", 7]))),
            TypeError,
            "filters.tags[1] must be str, got int: nothing was sent",
        ),
        (
            lambda client: client.search("p", SearchQuery(query="port", strategy="fastest")),
            ValueError,
            "strategy is not one the service takes: invalid enum value 'fastest': nothing was sent",
        ),
        (
            lambda client: client.memory_query("p", SearchQuery(query="port", as_of="yesterday")),
            ValueError,
            "as_of is not one the service takes: invalid RFC3339 encoded datetime: nothing was sent",
        ),
        (
            lambda client: client.search_batch(
                "p", ["port", SearchQuery(query="dns", weights=FusionWeights(lexical="1"))]
            ),
            TypeError,
            "queries[1].weights.lexical must be float | None, got str: nothing was sent",
        ),
        (
            lambda client: client.ingest("p", Document(id="d", text="t", tags="ops")),
            TypeError,
            "tags must be list, got str: nothing was sent",
        ),
        (
            lambda client: client.ingest("p", [Document(id="a", text="t"), Document(id=5, text="t")]),
            TypeError,
            "documents[1].id must be str, got int: nothing was sent",
        ),
        (
            lambda client: client.ingest("p", Document(id="d", text="t", expected_version="3")),
            TypeError,
            "expected_version must be int | None, got str: nothing was sent",
        ),
        (
            lambda client: client.list_documents("p", where=DocumentFilter(tag=["ops"])),
            TypeError,
            "where.tag must be str | None, got list: nothing was sent",
        ),
        (
            lambda client: client.list_documents("p", limit="10"),
            TypeError,
            "limit must be int, got str: nothing was sent",
        ),
        (
            lambda client: client.list_projects(cursor=5),
            TypeError,
            "cursor must be str | None, got int: nothing was sent",
        ),
        (  # went out as `If-Match: True`
            lambda client: client.ingest("p", Document(id="d", text="t"), if_match=True),
            TypeError,
            "if_match must be int | '*' | None, got bool: nothing was sent",
        ),
        (  # went out as `If-Match: 7.5`
            lambda client: client.delete_document("p", "d", if_match=7.5),
            TypeError,
            "if_match must be int | '*' | None, got float: nothing was sent",
        ),
        (
            lambda client: client.delete_document("p", "d", if_match=-1),
            ValueError,
            "if_match must be a version, 0 or more, or '*', got -1: nothing was sent",
        ),
    ],
)
def test_a_field_of_the_wrong_type_is_refused_naming_it_and_nothing_is_sent(
    server: ScriptedServer, send: Callable[[PoimenClient], object], error: type[Exception], message: str
) -> None:
    # Structs are not checked when built: these went out as sent and came back as the service's 400 (or, for
    # `as_of`, an AttributeError about `tzinfo`), or were read by the service as something else (`limit="10"`).
    server.script = [(400, {"Content-Type": "application/problem+json"}, {"status": 400, "detail": "refused"})]

    with PoimenClient(server.url) as client, pytest.raises(error) as raised:
        send(client)

    assert type(raised.value) is error
    assert str(raised.value) == message
    assert server.arrivals == []


def test_a_time_given_as_rfc3339_text_is_still_sent(server: ScriptedServer) -> None:
    # The JSON a datetime becomes: callers who pass it as text were served before and still are.
    server.script = [(200, {}, {"project": "p", "items": [], "next_cursor": None})]

    with PoimenClient(server.url) as client:
        client.list_documents("p", where=DocumentFilter(updated_since="2026-01-02T03:04:05Z"))

    assert [arrival.path for arrival in server.arrivals] == [
        "/v1/projects/p/documents?limit=100&updated_since=2026-01-02T03%3A04%3A05Z"
    ]
