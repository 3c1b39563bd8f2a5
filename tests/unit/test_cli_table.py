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
