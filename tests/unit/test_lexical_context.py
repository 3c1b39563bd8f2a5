"""`neighbour_contexts`: what each chunk's low-boost lexical context field holds."""

from __future__ import annotations

from app.domain.models import Chunk
from app.engines.lexical_context import neighbour_contexts


def make_chunk(position: int, text: str, *, context: str = "") -> Chunk:
    return Chunk(
        chunk_id=f"doc#{position}",
        document_id="doc",
        project_id="p",
        text=text,
        source="notes.md",
        level="section",
        breadcrumb=(),
        section_title="",
        position=position,
        context=context,
    )


def test_each_chunk_gets_its_own_context_then_its_neighbours_in_position_order() -> None:
    chunks = [make_chunk(2, "gamma"), make_chunk(0, "alpha", context="asked before"), make_chunk(1, "beta")]

    contexts = neighbour_contexts(chunks)

    assert contexts == {"doc#0": "asked before\nbeta", "doc#1": "alpha\ngamma", "doc#2": "beta"}


def test_a_single_chunk_has_only_its_own_context() -> None:
    assert neighbour_contexts([make_chunk(0, "alpha")]) == {"doc#0": ""}
    assert neighbour_contexts([make_chunk(0, "alpha", context="the question")]) == {"doc#0": "the question"}


def test_long_neighbours_give_their_nearest_whole_words_within_the_cap() -> None:
    before = " ".join(f"early{index}" for index in range(100)) + " boundary-left"
    after = "boundary-right " + " ".join(f"late{index}" for index in range(100))
    chunks = [make_chunk(0, before), make_chunk(1, "middle", context="own words"), make_chunk(2, after)]

    context = neighbour_contexts(chunks, max_chars=109)["doc#1"]
    own, left, right = context.split("\n")

    assert own == "own words"
    assert left.endswith("boundary-left")
    assert right.startswith("boundary-right")
    assert len(left) <= 50
    assert len(right) <= 50
    assert all(word in before.split() for word in left.split())  # no word cut in half
    assert all(word in after.split() for word in right.split())


def test_an_own_context_longer_than_the_cap_leaves_no_room_for_neighbours() -> None:
    chunks = [make_chunk(0, "alpha"), make_chunk(1, "beta", context="word " * 30)]

    context = neighbour_contexts(chunks, max_chars=40)["doc#1"]

    assert len(context) <= 40
    assert "alpha" not in context
