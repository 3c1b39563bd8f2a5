"""`chunk_codec`: the one Chunk <-> stored record mapping, and the stored bytes it must keep producing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from app.domain.models import Chunk
from app.engines.chunk_codec import chunk_from_record, chunk_to_record
from app.engines.tantivy_schema import decode_chunk, encode_chunk

DATED = datetime(2024, 3, 1, 12, 30, 5, 123456, tzinfo=timezone(timedelta(hours=2)))


def make_chunk(**overrides: object) -> Chunk:
    values: dict[str, object] = {
        "chunk_id": "doc#1",
        "document_id": "doc",
        "project_id": "p",
        "text": "Drain the café node first.",
        "source": "notes.md",
        "level": "L1",
        "breadcrumb": ("Runbooks", "Upgrades"),
        "section_title": "Upgrades",
        "position": 3,
        "tags": ("k8s",),
        "event_time": DATED,
        "chunk_hash": "abc",
        "context": "the previous turn",
    }
    values.update(overrides)
    return Chunk(**values)  # type: ignore[arg-type]


def test_a_record_holds_the_chunk_without_its_context() -> None:
    record = chunk_to_record(make_chunk())

    assert record == {
        "chunk_id": "doc#1",
        "document_id": "doc",
        "project_id": "p",
        "text": "Drain the café node first.",
        "source": "notes.md",
        "level": "L1",
        "breadcrumb": ["Runbooks", "Upgrades"],
        "section_title": "Upgrades",
        "position": 3,
        "tags": ["k8s"],
        "event_time": "2024-03-01T12:30:05.123456+02:00",
        "chunk_hash": "abc",
    }


def test_a_record_rebuilds_the_chunk_with_the_context_given() -> None:
    chunk = make_chunk()

    rebuilt = chunk_from_record(chunk_to_record(chunk), context=chunk.context)

    assert rebuilt == chunk


def test_the_text_can_be_stored_under_another_key() -> None:
    record = chunk_to_record(make_chunk(), text_key="content")

    assert "text" not in record
    assert chunk_from_record(record, text_key="content").text == "Drain the café node first."


def test_a_datetime_event_time_is_taken_as_it_is() -> None:
    record = chunk_to_record(make_chunk()) | {"event_time": DATED}

    assert chunk_from_record(record).event_time == DATED


def test_an_event_time_read_without_a_time_zone_is_utc() -> None:
    # PostgreSQL's driver reads a stored -infinity as a naive `datetime.min`.
    record = chunk_to_record(make_chunk()) | {"event_time": datetime.min}  # noqa: DTZ901 - what the driver gives

    assert chunk_from_record(record).event_time == datetime.min.replace(tzinfo=UTC)


def test_missing_optional_fields_take_the_chunk_defaults() -> None:
    record = {"chunk_id": "c", "document_id": "d", "project_id": "p", "text": "t", "source": "s", "level": "L2"}

    chunk = chunk_from_record(record)

    assert chunk == Chunk("c", "d", "p", "t", "s", "L2", (), "", 0)


def test_the_tantivy_payload_bytes_are_unchanged() -> None:
    chunk = make_chunk(event_time=datetime(2024, 3, 1, tzinfo=UTC))

    payload = encode_chunk(chunk)

    assert (
        payload
        == (
            '{"chunk_id": "doc#1", "document_id": "doc", "project_id": "p", "text": "Drain the café node first.", '
            '"source": "notes.md", "level": "L1", "breadcrumb": ["Runbooks", "Upgrades"], "section_title": "Upgrades", '
            '"position": 3, "tags": ["k8s"], "event_time": "2024-03-01T00:00:00+00:00", "chunk_hash": "abc"}'
        ).encode()
    )
    assert decode_chunk(payload) == make_chunk(event_time=datetime(2024, 3, 1, tzinfo=UTC), context="")


@pytest.mark.parametrize(
    "payload", [b'{"chunk_id": "c", "text": ', b"\xff\xfe", b"[]"], ids=["cut short", "not UTF-8", "not an object"]
)
def test_a_damaged_payload_raises_what_the_lexical_search_counts_as_damage(payload: bytes) -> None:
    # `app.engines.tantivy_index` marks a project's index damaged (and repairs it) on a ValueError.
    with pytest.raises(ValueError, match=r"\S"):
        decode_chunk(payload)
