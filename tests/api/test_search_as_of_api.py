"""`as_of` over HTTP on the real engines: the memory's clock for relative dates, on GET as on POST.

Most painting notes sit in June 2023. With `as_of` on Thursday 15 June 2023, "last week" is Monday 5 June
to Monday 12 June. Two notes sit in the real clock's last week, so a search without `as_of` has pages too.
Cursors are bound to the `as_of` they were minted with and carry the moment their first page resolved
relative dates against.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from app.api.cursors import decode_cursor, encode_cursor
from tests.api.conftest import wait_indexed

AS_OF = "2023-06-15T12:00:00Z"
LAST_WEEK = ("2023-06-05T00:00:00Z", "2023-06-12T00:00:00Z")
QUERY = "what did we paint last week"
IN_LAST_WEEK = {"last-week", *(f"more-{day}" for day in range(5, 10))}
DOCUMENTS: list[dict[str, Any]] = [
    {
        "id": "earlier",
        "title": "Painting",
        "text": "We painted the lake at dawn.",
        "event_time": "2023-05-20T09:00:00Z",
    },
    {"id": "last-week", "title": "Painting", "text": "We painted the harbour.", "event_time": "2023-06-07T09:00:00Z"},
    {"id": "this-week", "title": "Painting", "text": "We painted the meadow.", "event_time": "2023-06-14T09:00:00Z"},
    *(
        {
            "id": f"more-{day}",
            "title": "Painting",
            "text": f"We painted boat {day}.",
            "event_time": f"2023-06-0{day}T10:00:00Z",
        }
        for day in range(5, 10)
    ),
]


def real_last_week_documents() -> list[dict[str, Any]]:
    """Two notes in the real clock's last week (Tuesday and Wednesday of it)."""
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    monday = today - timedelta(days=today.weekday() + 7)
    return [
        {"id": f"recent-{n}", "title": "Painting", "text": f"We painted fence {n}.", "event_time": moment.isoformat()}
        for n, moment in enumerate((monday + timedelta(days=1, hours=9), monday + timedelta(days=2, hours=9)))
    ]


@pytest.fixture(scope="module")
async def project(api_client) -> str:
    name = "as-of-paintings"
    documents = [*DOCUMENTS, *real_last_week_documents()]
    response = await api_client.post(f"/v1/projects/{name}/documents", json={"documents": documents})
    assert response.status_code == 201, response.text
    for document in documents:
        await wait_indexed(api_client, name, document["id"])
    return name


def event_range(answer: dict[str, Any]) -> tuple[str | None, str | None]:
    analysis = answer["query_analysis"]
    return analysis["event_time_from"], analysis["event_time_to"]


async def get(api_client, params: dict[str, str]) -> Any:
    return await api_client.get("/memory/query", params={"explain": "true", **params})


async def test_get_resolves_last_week_against_as_of(api_client, project) -> None:
    response = await get(api_client, {"query": QUERY, "project": project, "limit": "20", "as_of": AS_OF})

    assert response.status_code == 200, response.text
    answer = response.json()
    assert event_range(answer) == LAST_WEEK
    assert {hit["id"].split("#")[0] for hit in answer["results"]} == IN_LAST_WEEK


async def test_get_as_of_with_an_offset_reads_days_and_weeks_in_that_offset(api_client, project) -> None:
    in_tokyo = "2023-06-15T21:00:00+09:00"  # the same instant as AS_OF

    response = await get(api_client, {"query": QUERY, "project": project, "as_of": in_tokyo})

    assert response.status_code == 200, response.text
    # Monday 5 June to Monday 12 June in Tokyo, each at 15:00 UTC the day before.
    assert event_range(response.json()) == ("2023-06-04T15:00:00Z", "2023-06-11T15:00:00Z")


async def test_today_is_the_day_of_the_as_of_offset(api_client, project) -> None:
    """Early morning in Tokyo is still the day before in UTC: "today" is Tokyo's 15 June."""
    response = await get(
        api_client, {"query": "what did we paint today", "project": project, "as_of": "2023-06-15T08:00:00+09:00"}
    )

    assert response.status_code == 200, response.text
    assert event_range(response.json()) == ("2023-06-14T15:00:00Z", "2023-06-15T15:00:00Z")


async def test_a_range_from_this_month_until_yesterday_runs_from_the_month_to_yesterday(api_client, project) -> None:
    """Yesterday (14 June) lies in June 2023: the range is the span of the two, not their overlap (yesterday)."""
    response = await api_client.post(
        "/v1/search",
        json={"query": "what did we paint since June 2023 until yesterday", "project": project, "as_of": AS_OF}
        | {"explain": True, "limit": 20},
    )

    assert response.status_code == 200, response.text
    answer = response.json()
    assert event_range(answer) == ("2023-06-01T00:00:00Z", "2023-06-15T00:00:00Z")
    assert {hit["id"].split("#")[0] for hit in answer["results"]} == {*IN_LAST_WEEK, "this-week"}


@pytest.mark.parametrize(
    ("when", "expected_range", "expected_ids"),
    [
        # As of Thursday 15 June 2023: Friday 9 June; last week; Wednesday 14 June and Thursday 15 June.
        ("last Friday", ("2023-06-09T00:00:00Z", "2023-06-10T00:00:00Z"), {"more-9"}),
        ("a week ago", LAST_WEEK, IN_LAST_WEEK),
        ("last night", ("2023-06-14T00:00:00Z", "2023-06-16T00:00:00Z"), {"this-week"}),
    ],
)
async def test_spoken_relative_dates_narrow_the_search_against_as_of(
    api_client, project, when: str, expected_range: tuple[str, str], expected_ids: set[str]
) -> None:
    response = await api_client.post(
        "/v1/search",
        json={"query": f"what did we paint {when}", "project": project, "as_of": AS_OF, "explain": True, "limit": 20},
    )

    assert response.status_code == 200, response.text
    answer = response.json()
    assert event_range(answer) == expected_range
    assert {hit["id"].split("#")[0] for hit in answer["results"]} == expected_ids


@pytest.mark.parametrize("as_of", ["0001-01-01T00:00:00Z", "0001-01-20T05:00:00+09:00", "9999-12-31T23:00:00Z"])
@pytest.mark.parametrize("when", ["yesterday", "last week", "this week", "last month", "last year", "in december"])
async def test_an_as_of_at_the_ends_of_the_calendar_answers(api_client, project, as_of: str, when: str) -> None:
    response = await api_client.post(
        "/v1/search", json={"query": f"what did we paint {when}", "project": project, "as_of": as_of}
    )

    assert response.status_code == 200, response.text


@pytest.mark.parametrize(
    ("as_of", "when"),
    [
        ("0001-01-20T05:00:00+09:00", "last month"),
        ("0001-01-01T10:00:00Z", "yesterday"),
        ("0001-01-03T12:00:00Z", "last week"),
        ("0001-01-20T00:00:00Z", "in december"),
    ],
)
async def test_a_query_date_wholly_before_year_1_keeps_its_filter_and_finds_no_dated_note(
    api_client, project, as_of: str, when: str
) -> None:
    # Its range clamps to [0001-01-01, 0001-01-01): it was dropped as empty, and every note of every date came back.
    body = {"query": f"what did we paint {when}", "project": project, "as_of": as_of, "strategy": "hybrid"}

    response = await api_client.post("/v1/search", json=body | {"explain": True})

    assert response.status_code == 200, response.text
    analysis = response.json()["query_analysis"]
    calendar_start = ("0001-01-01T00:00:00Z", "0001-01-01T00:00:00Z")
    assert (analysis["event_time_from"], analysis["event_time_to"]) == calendar_start
    assert (analysis["applied_event_time_from"], analysis["applied_event_time_to"]) == calendar_start
    assert analysis["undated_included"] is True
    assert response.json()["results"] == []  # every painting note is dated, none before year 1


async def test_get_without_as_of_resolves_against_the_server_clock(api_client, project) -> None:
    response = await get(api_client, {"query": QUERY, "project": project})

    assert response.status_code == 200, response.text
    assert event_range(response.json())[0] > "2025"


@pytest.mark.parametrize(
    "as_of", ["2023-06-15T12:00:00", "2023-06-15", "last tuesday", "", "2023-13-45T99:00:00Z", "1686830400"]
)
async def test_get_refuses_an_as_of_without_an_offset_or_garbage(api_client, project, as_of: str) -> None:
    response = await api_client.get("/memory/query", params={"query": QUERY, "project": project, "as_of": as_of})

    assert response.status_code == 400, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    assert response.json()["field"] == "as_of"
    # Worded as a JSON body's `as_of` (`readable_validation_message`), with the value as received.
    assert response.json()["detail"].startswith("as_of: expected a")
    assert "2024-05-08T12:00:00Z" in response.json()["detail"]
    assert f"got {as_of!r}" in response.json()["detail"]


async def test_a_plus_offset_sent_unencoded_is_shown_as_received_with_how_to_send_it(api_client, project) -> None:
    response = await api_client.get(
        "/memory/query", params={"query": QUERY, "project": project, "as_of": "2024-10-30T12:00:00 00:00"}
    )

    assert response.status_code == 400, response.text
    assert "got '2024-10-30T12:00:00 00:00'" in response.json()["detail"]
    assert "send it as %2B" in response.json()["detail"]


async def test_post_refuses_an_as_of_without_an_offset_like_get(api_client, project) -> None:
    response = await api_client.post(
        "/v1/search", json={"query": QUERY, "project": project, "as_of": "2023-06-15T12:00:00"}
    )

    assert response.status_code == 400, response.text
    assert response.json()["field"] == "as_of"


async def test_a_get_cursor_replayed_with_another_as_of_is_refused(api_client, project) -> None:
    params = {"query": "painted", "project": project, "limit": "2"}
    first = (await get(api_client, params | {"offset": "0", "as_of": AS_OF})).json()
    assert first["next_cursor"]

    other = await get(api_client, params | {"cursor": first["next_cursor"], "as_of": "2024-01-01T00:00:00Z"})
    absent = await get(api_client, params | {"cursor": first["next_cursor"]})
    # The same instant in another offset: its days and weeks are other ones, so it is another question.
    elsewhere = await get(api_client, params | {"cursor": first["next_cursor"], "as_of": "2023-06-15T14:00:00+02:00"})
    same = await get(api_client, params | {"cursor": first["next_cursor"], "as_of": AS_OF})

    assert (other.status_code, other.json()["field"]) == (400, "cursor")
    assert (absent.status_code, absent.json()["field"]) == (400, "cursor")
    assert (elsewhere.status_code, elsewhere.json()["field"]) == (400, "cursor")
    assert same.status_code == 200, same.text
    assert [hit["rank"] for hit in same.json()["results"]] == [3, 4]


async def test_a_post_cursor_replayed_with_another_as_of_is_refused(api_client, project) -> None:
    body = {"query": "painted", "project": project, "limit": 2}
    first = (await api_client.post("/v1/search", json=body | {"offset": 0})).json()

    response = await api_client.post("/v1/search", json=body | {"cursor": first["next_cursor"], "as_of": AS_OF})

    assert response.status_code == 400
    assert response.json()["field"] == "cursor"


async def test_later_pages_resolve_relative_dates_against_the_first_pages_moment(api_client, project) -> None:
    params = {"query": "painted last week", "project": project, "limit": "1"}
    first = (await get(api_client, params | {"offset": "0"})).json()
    assert {hit["id"].split("#")[0] for hit in first["results"]} <= {"recent-0", "recent-1"}
    values = decode_cursor(first["next_cursor"], kind="search")

    second = (await get(api_client, params | {"cursor": first["next_cursor"]})).json()
    # The cursor says when the first page ran; moved to a 2023 moment, the next page resolves "last week"
    # against that moment, not against the clock at the time the page is asked for.
    moved = (await get(api_client, params | {"cursor": encode_cursor("search", {**values, "t": AS_OF})})).json()

    assert event_range(second) == event_range(first)
    assert event_range(moved) == LAST_WEEK


async def test_a_cursor_with_a_bad_moment_is_refused(api_client, project) -> None:
    params = {"query": "painted", "project": project, "limit": "1"}
    first = (await get(api_client, params | {"offset": "0"})).json()
    values = decode_cursor(first["next_cursor"], kind="search")

    responses = [
        await get(api_client, params | {"cursor": encode_cursor("search", {**values, "t": moment})})
        for moment in ("yesterday", "2023-06-15T12:00:00", 1686830400)
    ]

    assert [(response.status_code, response.json()["field"]) for response in responses] == [(400, "cursor")] * 3


async def test_explain_shows_the_range_the_search_applied_beside_the_one_the_query_describes(
    api_client, project
) -> None:
    body = {"query": QUERY, "project": project, "as_of": AS_OF, "explain": True}
    words_only = (await api_client.post("/v1/search", json=body)).json()["query_analysis"]
    apart = {"date_from": "2023-05-01T00:00:00Z", "date_to": "2023-06-01T00:00:00Z"}  # no overlap with last week
    with_filters = await api_client.post("/v1/search", json=body | {"filters": apart})

    assert (words_only["applied_event_time_from"], words_only["applied_event_time_to"]) == LAST_WEEK
    assert words_only["undated_included"] is True
    analysis = with_filters.json()["query_analysis"]
    assert (analysis["event_time_from"], analysis["event_time_to"]) == LAST_WEEK  # what the words say
    assert (analysis["applied_event_time_from"], analysis["applied_event_time_to"]) == tuple(apart.values())
    assert analysis["undated_included"] is False
    assert {hit["id"].split("#")[0] for hit in with_filters.json()["results"]} == {"earlier"}


async def test_a_cursor_whose_offset_or_generation_is_a_boolean_is_refused(api_client, project) -> None:
    # JSON true passed for offset 1: the answer then said `"offset": true` and ranked from 2.
    params = {"query": "painted", "project": project, "limit": "1"}
    first = (await get(api_client, params | {"offset": "0"})).json()
    values = decode_cursor(first["next_cursor"], kind="search")

    responses = [
        await get(api_client, params | {"cursor": encode_cursor("search", {**values, key: True})}) for key in ("o", "g")
    ]

    assert [(response.status_code, response.json()["field"]) for response in responses] == [(400, "cursor")] * 2
