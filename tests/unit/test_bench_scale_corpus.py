"""The pure parts of the scale benchmark's corpus: distinct texts by seed, composed vectors, recall@k."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest

if TYPE_CHECKING:
    from types import ModuleType

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "scale_corpus.py"


def _load_scale_corpus() -> ModuleType:
    specification = importlib.util.spec_from_file_location("scale_corpus", SCRIPT)
    assert specification is not None
    assert specification.loader is not None
    module = importlib.util.module_from_spec(specification)
    sys.modules["scale_corpus"] = module
    specification.loader.exec_module(module)
    return module


scale_corpus = _load_scale_corpus()


def test_chunk_plan_is_distinct_and_deterministic_by_seed() -> None:
    texts = [f"sentence number {index} of the corpus." for index in range(50)]
    plan = scale_corpus.chunk_plan(400, len(texts), seed=7)

    chunk_texts = [scale_corpus.chunk_text(texts, entry) for entry in plan]

    assert len(chunk_texts) == 400
    assert len(set(chunk_texts)) == 400
    assert plan[:50] == [(index, None) for index in range(50)]
    assert all(first < second for first, second in plan[50:])
    assert scale_corpus.chunk_plan(400, len(texts), seed=7) == plan
    assert scale_corpus.chunk_plan(400, len(texts), seed=8) != plan


def test_compose_pairs_refuses_more_pairs_than_exist() -> None:
    with pytest.raises(ValueError, match="make only 6"):
        scale_corpus.compose_pairs(7, 4)


def test_split_sentences_keeps_real_sentences_within_bounds() -> None:
    text = "Short one. " + "This sentence is long enough to be kept as a base text. " + "X" * 700 + ". Tail?"

    assert scale_corpus.split_sentences(text) == ["This sentence is long enough to be kept as a base text."]


def test_pair_vectors_weigh_each_text_by_its_token_count() -> None:
    pooled = np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    tokens = np.array([3, 1], dtype=np.int32)

    vectors = scale_corpus.pair_vectors(pooled, tokens, [(0, None), (0, 1)])

    assert vectors[0] == pytest.approx([1.0, 0.0])
    assert vectors[1] == pytest.approx(np.array([3.0, 1.0]) / np.sqrt(10.0))


def test_recall_at_k_is_the_mean_overlap_with_the_exact_top_k() -> None:
    exact = [["a", "b", "c", "d"], ["e", "f", "g", "h"], []]
    approximate = [["a", "b", "x", "y"], ["h", "g", "f", "e"], ["z"]]

    assert scale_corpus.recall_at_k(approximate, exact, k=4) == pytest.approx((0.5 + 1.0) / 2)
    assert scale_corpus.recall_at_k(approximate, exact, k=2) == pytest.approx((1.0 + 0.0) / 2)


def test_recall_of_no_queries_is_an_error() -> None:
    with pytest.raises(ValueError, match="no queries"):
        scale_corpus.recall_at_k([[]], [[]], k=10)
