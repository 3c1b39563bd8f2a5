from __future__ import annotations

from app.cli.memory_commands import results_table
from app.domain.models import Chunk, FusedHit, FusionMethod, SearchStrategy
from app.domain.results import SearchResult


def hit(document_id: str, *, score: float, relevance: float, ranks: dict[str, int]) -> FusedHit:
    chunk = Chunk(
        chunk_id=f"{document_id}#0",
        document_id=document_id,
        project_id="p",
        text="When consumer   lag grows,\ncheck the rebalance.",
        source=f"{document_id}.md",
        level="L1",
        breadcrumb=("Kafka",),
        section_title="Kafka",
        position=0,
    )
    return FusedHit(chunk=chunk, score=score, ranks=ranks, leg_scores={}, contributions={}, relevance=relevance)


def test_the_table_shows_the_final_score_the_api_returns_not_the_fusion_score() -> None:
    result = SearchResult(
        hits=(
            hit("kafka", score=1.3251, relevance=0.4321, ranks={"semantic": 1, "lexical": 2}),
            hit("pg", score=-0.6547, relevance=0.1234, ranks={"semantic": 2}),
        ),
        strategy=SearchStrategy.HYBRID,
        fusion_method=FusionMethod.ZSCORE,
        legs={},
        stage_ms={},
    )

    lines = results_table("lag", result, total_ms=12.4).splitlines()

    assert lines[0] == '"lag": hybrid, 2 results, 12 ms'
    assert lines[2].split()[:5] == ["1", "0.4321", "1", "2", "kafka"]
    assert lines[3].split()[:5] == ["2", "0.1234", "2", "-", "pg"]
    assert lines[2].endswith("When consumer lag grows, check the rebalance.")


def table_text_of(text: str) -> str:
    chunk = Chunk(
        chunk_id="d#0", document_id="d", project_id="p", text=text, source="d.md", level="L1", breadcrumb=(),
        section_title="", position=0,
    )  # fmt: skip
    result = SearchResult(
        hits=(FusedHit(chunk=chunk, score=1.0, ranks={"lexical": 1}, leg_scores={}, contributions={}, relevance=1.0),),
        strategy=SearchStrategy.LEXICAL,
        fusion_method=FusionMethod.RRF,
        legs={},
        stage_ms={},
    )
    return results_table("q", result, total_ms=1.0).splitlines()[2].split("  ")[-1].strip()


def test_a_long_text_is_cut_between_characters_as_they_are_seen_never_inside_one() -> None:
    # Cut at 69 code points, the Thai letter kept its place and lost its tone mark (another word), and the
    # emoji sequence kept a dangling zero-width joiner.
    thai = "a" * 68 + "\u0e02\u0e49\u0e32\u0e27 and more text"
    emoji = "a" * 67 + "\U0001f469\u200d\U0001f4bb and more text"
    hindi = "a" * 67 + "\u0915\u093f\u0924\u093e\u092c and more text"

    assert table_text_of(thai) == "a" * 68 + "\u2026"
    assert table_text_of(emoji) == "a" * 67 + "\u2026"
    assert table_text_of(hindi) == "a" * 67 + "\u0915\u093f\u2026"
    assert table_text_of("b" * 80) == "b" * 69 + "\u2026"
