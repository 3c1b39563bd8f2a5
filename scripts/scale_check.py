"""How close a composed pair vector (`scale_corpus.pair_vectors`) is to the model's real vector of that text."""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING, Any

import numpy as np
from scale_corpus import base_texts, chunk_text, compose_pairs, pair_vectors
from scale_vectors import load_base_vectors

from app.engines.embedder import load_embedder

if TYPE_CHECKING:
    from pathlib import Path


def check_composition(datasets: Path, cache: Path, *, pairs: int) -> dict[str, Any]:
    """Cosine(composed, really embedded) over `pairs` seeded pairs of cached base texts, and a baseline.

    The baseline is the cosine between a pair's real vector and the composed vector of the *next* pair,
    so the reader sees how much closer the composition is than an unrelated chunk.
    """
    texts = base_texts(datasets)
    pooled, tokens = load_base_vectors(texts, cache)
    plan: list[tuple[int, int | None]] = list(compose_pairs(pairs, len(pooled), seed=12345))
    composed = pair_vectors(pooled, tokens, plan)
    real = np.array(load_embedder("all-MiniLM-L6-v2").encode([chunk_text(texts, entry) for entry in plan]))
    same = (composed * real).sum(axis=1)
    other = (np.roll(composed, 1, axis=0) * real).sum(axis=1)
    cuts = statistics.quantiles(same.tolist(), n=20)
    return {
        "pairs": pairs,
        "base_texts": len(pooled),
        "cosine_composed_vs_real": {
            "mean": round(float(same.mean()), 4),
            "p5": round(cuts[0], 4),
            "min": round(float(same.min()), 4),
        },
        "cosine_unrelated_baseline_mean": round(float(other.mean()), 4),
    }
