"""Reading the index generation from a `get_settings` answer (pure)."""

from __future__ import annotations

from app.engines.opensearch_generation import Generation, generation_from_settings


def settings_of(index: str, uuid: str) -> dict[str, object]:
    return {index: {"settings": {"index": {"uuid": uuid, "number_of_shards": "1"}}}}


def test_the_concrete_index_and_its_uuid_are_the_generation() -> None:
    assert generation_from_settings("notes", settings_of("notes-v6", "u1")) == Generation("notes-v6", "u1")


def test_an_index_recreated_under_the_same_name_is_another_generation() -> None:
    first = generation_from_settings("notes", settings_of("notes-v6", "u1"))

    second = generation_from_settings("notes", settings_of("notes-v6", "u2"))

    assert first != second


def test_a_concrete_index_squatting_the_alias_name_is_no_generation() -> None:
    assert generation_from_settings("notes", settings_of("notes", "u1")) is None


def test_an_alias_on_two_indexes_or_none_is_no_generation() -> None:
    both = settings_of("notes-v5", "u1") | settings_of("notes-v6", "u2")

    assert generation_from_settings("notes", both) is None
    assert generation_from_settings("notes", {}) is None
    assert generation_from_settings("notes", {"notes-v6": {"settings": {"index": {}}}}) is None
