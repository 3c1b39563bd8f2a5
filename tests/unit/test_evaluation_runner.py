"""The harness end to end on the in-memory reference adapters and a bag-of-words embedder (no servers)."""

from __future__ import annotations

import asyncio
import hashlib
import math
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from app.config import Settings
from app.domain.errors import EngineTimeoutError
from app.domain.models import FusionMethod, SearchStrategy
from app.engines.memory import InMemoryDocumentStore
from app.engines.memory_lexical import InMemoryLexicalIndex
from app.engines.memory_vectors import InMemoryVectorIndex
from app.evaluation.datasets import load_dataset, project_id_for
from app.evaluation.ingest import EvaluationEngines, ensure_ingested
from app.evaluation.report import markdown_table, results_document, trec_run_lines
from app.evaluation.runner import (
    QueryRunner,
    RunSpec,
    default_run_spec,
    document_ranking,
    latency_summary,
    run_specs,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

FIXTURES = Path(__file__).parent.parent / "fixtures" / "eval"
DIMENSIONS = 64


class BagOfWordsEmbedder:
    """Hashes lowercase words into 64 buckets and normalises: similar wording, similar vectors."""

    name = "bag-of-words"
    model_name = "bag-of-words-64"
    dimensions = DIMENSIONS

    def __init__(self) -> None:
        self.embedded = 0

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.embedded += len(texts)
        return [self._vector(text) for text in texts]

    async def embed_query(self, text: str, *, scope: str = "") -> list[float]:
        return self._vector(text)

    @staticmethod
    def _vector(text: str) -> list[float]:
        vector = [0.0] * DIMENSIONS
        for word in text.lower().split():
            vector[hashlib.sha256(word.strip("?.!,").encode()).digest()[0] % DIMENSIONS] += 1.0
        norm = math.sqrt(sum(value * value for value in vector)) or 1.0
        return [value / norm for value in vector]


def memory_engines() -> tuple[EvaluationEngines, BagOfWordsEmbedder]:
    store = InMemoryDocumentStore()
    embedder = BagOfWordsEmbedder()
    engines = EvaluationEngines(
        embedder=embedder, vector=InMemoryVectorIndex(store), lexical=InMemoryLexicalIndex(), store=store
    )
    return engines, embedder


def test_document_ranking_drops_the_query_id_and_repeated_documents() -> None:
    ranking = document_ranking("q3", ["q3", "d4", "d4", "d1"])

    assert ranking == {"d4": 100.0, "d1": 99.0}


def test_document_ranking_stops_at_the_depth() -> None:
    assert list(document_ranking("q", ["a", "b", "c"], depth=2)) == ["a", "b"]


def test_run_specs_run_fusion_free_strategies_once_and_always_include_the_default() -> None:
    settings = Settings(ranking_algorithm=FusionMethod.ZSCORE, query_optimization_enabled=False)

    specs = run_specs(["semantic", "cascading", "hybrid"], ["rrf"], settings)

    assert [spec.name for spec in specs] == ["semantic", "hybrid-rrf", "cascading", "hybrid-zscore"]


def test_default_run_follows_the_routing_flag() -> None:
    routed = default_run_spec(Settings(query_optimization_enabled=True, ranking_algorithm=FusionMethod.RRF))
    fixed = default_run_spec(Settings(search_strategy=SearchStrategy.LEXICAL, query_optimization_enabled=False))

    assert routed == RunSpec("routed-rrf", None, FusionMethod.RRF)
    assert fixed == RunSpec("lexical", SearchStrategy.LEXICAL, None)  # no fusion option: lexical would refuse it


def test_latency_summary_reports_percentiles() -> None:
    summary = latency_summary([float(value) for value in range(1, 101)])

    assert summary["p50"] == pytest.approx(50.5)
    assert summary["mean"] == pytest.approx(50.5)
    assert summary["p95"] == pytest.approx(95.05)


async def test_second_ingest_is_skipped_by_the_marker(tmp_path: Path) -> None:
    dataset = load_dataset(FIXTURES / "tiny-beir", split="test")
    engines, embedder = memory_engines()
    settings = Settings(chunk_max_chars=400, chunk_overlap_chars=0)

    first = await ensure_ingested(dataset, engines, settings, marker_dir=tmp_path)
    embedded_after_first = embedder.embedded
    second = await ensure_ingested(dataset, engines, settings, marker_dir=tmp_path)

    assert not first.skipped
    assert first.created == 7
    assert second.skipped
    assert embedder.embedded == embedded_after_first


class HangingEmbedder(BagOfWordsEmbedder):
    """Never finishes a passage batch, as a wedged model would."""

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        await asyncio.Event().wait()
        return await super().embed_documents(texts)


async def test_ingest_honours_the_configured_embedding_timeout(tmp_path: Path) -> None:
    dataset = load_dataset(FIXTURES / "tiny-beir", split="test")
    store = InMemoryDocumentStore()
    engines = EvaluationEngines(
        embedder=HangingEmbedder(), vector=InMemoryVectorIndex(store), lexical=InMemoryLexicalIndex(), store=store
    )

    with pytest.raises(EngineTimeoutError, match=r"longer than 0\.05 s"):
        await ensure_ingested(dataset, engines, Settings(ingest_embed_timeout_s=0.05), marker_dir=tmp_path)


async def test_changed_settings_ingest_again(tmp_path: Path) -> None:
    dataset = load_dataset(FIXTURES / "tiny-beir", split="test")
    engines, _ = memory_engines()
    await ensure_ingested(dataset, engines, Settings(chunk_max_chars=400), marker_dir=tmp_path)

    again = await ensure_ingested(dataset, engines, Settings(chunk_max_chars=300), marker_dir=tmp_path)

    assert not again.skipped


async def test_lexical_run_finds_the_judged_documents_but_never_the_query_itself(tmp_path: Path) -> None:
    dataset = load_dataset(FIXTURES / "tiny-beir", split="test")
    engines, _ = memory_engines()
    settings = Settings(chunk_max_chars=400, chunk_overlap_chars=0)
    summary = await ensure_ingested(dataset, engines, settings, marker_dir=tmp_path)
    runner = QueryRunner(dataset, engines, settings, clocks=summary.clocks)

    result = await runner.run(RunSpec("lexical", SearchStrategy.LEXICAL, None), progress=False)
    ranked, _ = await runner.search(dataset.queries[2], RunSpec("lexical", SearchStrategy.LEXICAL, None))

    assert "q3" in ranked  # the searcher returns it ...
    assert result.per_query["MRR@10"]["q3"] == 1.0  # ... but scoring drops it, so d4 ranks first
    assert result.metrics["Recall@10"] == 1.0
    assert set(result.latency_ms) == {"p50", "p95", "mean"}


async def test_a_refused_query_counts_as_a_miss_with_a_warning_and_the_run_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    dataset = load_dataset(FIXTURES / "tiny-beir", split="test")
    engines, _ = memory_engines()
    # q1 (53 characters) is over this limit, the other judged queries are not.
    settings = Settings(chunk_max_chars=400, chunk_overlap_chars=0, query_max_chars=40)
    summary = await ensure_ingested(dataset, engines, settings, marker_dir=tmp_path)
    runner = QueryRunner(dataset, engines, settings, clocks=summary.clocks)

    with caplog.at_level("WARNING", logger="poimen.evaluation"):
        result = await runner.run(RunSpec("lexical", SearchStrategy.LEXICAL, None), progress=False)

    assert list(result.failed) == ["q1"]
    assert "InvalidQueryError" in result.failed["q1"]
    assert result.per_query["Recall@10"] == {"q1": 0.0, "q2": 1.0, "q3": 1.0, "q4": 1.0}
    assert result.metrics["Recall@10"] == 0.75  # the miss is in the mean, not left out of it
    assert any("q1" in record.getMessage() for record in caplog.records)
    assert any("1 of 4 queries failed" in record.getMessage() for record in caplog.records)
    # `--output` writes results.md from the results: the refused query's record is no metric column.
    document = results_document(dataset, [result], default_run="lexical", configuration={})
    table = markdown_table(document)
    assert "failed_queries" not in table.splitlines()[4]
    assert "Queries refused or failed, scored as misses: lexical 1." in table


async def test_conversational_queries_search_only_their_conversation(tmp_path: Path) -> None:
    dataset = load_dataset(FIXTURES / "tiny-chat", split="test")
    engines, _ = memory_engines()
    settings = Settings(chunk_max_chars=400, chunk_overlap_chars=0)
    summary = await ensure_ingested(dataset, engines, settings, marker_dir=tmp_path)
    runner = QueryRunner(dataset, engines, settings, clocks=summary.clocks)
    who_adopted = next(query for query in dataset.queries if query.query_id == "conv-b:q1")

    ranked, _ = await runner.search(who_adopted, RunSpec("hybrid-rrf", SearchStrategy.HYBRID, FusionMethod.RRF))
    result = await runner.run(RunSpec("hybrid-rrf", SearchStrategy.HYBRID, FusionMethod.RRF), progress=False)

    assert ranked
    assert all(document_id.startswith("conv-b:") for document_id in ranked)
    assert set(result.by_category) == {"1", "2", "4"}
    assert "Recall@5" in result.metrics


async def test_relative_dates_in_a_conversation_are_read_against_its_last_session(tmp_path: Path) -> None:
    dataset = load_dataset(FIXTURES / "tiny-chat", split="test")
    engines, _ = memory_engines()
    summary = await ensure_ingested(dataset, engines, Settings(), marker_dir=tmp_path)

    assert summary.clocks["eval-tiny-chat-conv-a"].date().isoformat() == "2023-06-28"


def test_trec_run_lines_list_each_query_best_first_with_one_based_ranks() -> None:
    rankings = {"q2": {"d9": 100.0}, "q1": {"d2": 99.0, "d1": 100.0}}

    lines = trec_run_lines("hybrid-rrf", rankings)

    assert lines == [
        "q1 Q0 d1 1 100 hybrid-rrf",
        "q1 Q0 d2 2 99 hybrid-rrf",
        "q2 Q0 d9 1 100 hybrid-rrf",
    ]


async def test_a_document_dropped_from_an_edited_corpus_is_removed_from_its_project(tmp_path: Path) -> None:
    folder = shutil.copytree(FIXTURES / "tiny-beir", tmp_path / "tiny-beir")
    engines, _ = memory_engines()
    settings = Settings(chunk_max_chars=400, chunk_overlap_chars=0)
    first = await ensure_ingested(load_dataset(folder, split="test"), engines, settings, marker_dir=tmp_path / "m")
    corpus = folder / "corpus.jsonl"
    lines = corpus.read_text(encoding="utf-8").splitlines(keepends=True)
    corpus.write_text("".join(line for line in lines if '"_id": "d2"' not in line), encoding="utf-8")

    edited = load_dataset(folder, split="test")
    second = await ensure_ingested(edited, engines, settings, marker_dir=tmp_path / "m")

    project = project_id_for(edited.name, None)
    assert (first.removed, second.removed) == (0, 1)
    assert await engines.store.get_document(project, "d2") is None
    assert await engines.store.get_document(project, "d1") is not None
