"""`lexical_text`: what a chunk's content and low-boost context fields hold in every lexical adapter."""

from __future__ import annotations

from app.domain.models import Chunk
from app.engines.lexical_context import lexical_text


def make_chunk(text: str, *, breadcrumb: tuple[str, ...] = (), context: str = "") -> Chunk:
    return Chunk(
        chunk_id="doc#1",
        document_id="doc",
        project_id="p",
        text=text,
        source="notes.md",
        level="L1",
        breadcrumb=breadcrumb,
        section_title=breadcrumb[-1] if breadcrumb else "",
        position=1,
        context=context,
    )


def test_the_content_is_the_breadcrumb_then_the_text() -> None:
    text = lexical_text(make_chunk("Drain the node first.", breadcrumb=("Runbooks", "Kubernetes", "Upgrades")))

    assert text.content == "Runbooks > Kubernetes > Upgrades\nDrain the node first."
    assert text.context == ""


def test_without_a_breadcrumb_the_content_is_the_text_alone() -> None:
    assert lexical_text(make_chunk("alpha")).content == "alpha"


def test_the_context_is_the_chunks_own_context() -> None:
    chunk = make_chunk("Yes, three of them.", context="Caroline: Did you plant apple trees?")

    assert lexical_text(chunk).context == "Caroline: Did you plant apple trees?"


def test_a_long_context_is_cut_at_a_word_boundary_within_the_cap() -> None:
    context = " ".join(f"word{index}" for index in range(100))

    cut = lexical_text(make_chunk("alpha", context=context), context_max_chars=50).context

    assert len(cut) <= 50
    assert cut
    assert context.startswith(cut)
    assert all(word in context.split() for word in cut.split())  # no word cut in half
