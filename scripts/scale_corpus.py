"""Synthetic-but-honest corpora for the scale benchmark (`scripts/bench_scale.py`): real text, cheap vectors.

Embedding a million chunks with the real model takes days on this machine, so a corpus of N chunks is:

1. **Base texts**: distinct real sentences, SciFact abstract sentences and LoCoMo conversation turns,
   deduplicated and shuffled with a fixed seed. The first `base_count` of them are embedded once with the
   real bundled model and cached (`embed_base_texts`): the mean-pooled vector *before* normalisation and
   the token count of each text.
2. **Chunks**: the first `min(N, base_count)` chunks are base texts with their real vectors. Past that,
   chunk i is the concatenation of two distinct base texts `a + " " + b`, each pair used once
   (`compose_pairs`); its vector is what the model's mean pooling gives a concatenation if tokens did not
   attend across the join: `normalize(n_a * m_a + n_b * m_b)` with `m` the pooled vector and `n` the token
   count (`pair_vectors`). `bench_scale.py --check-composition` embeds a sample of real concatenations and
   reports the cosine between that and the composed vector.

Bias, stated: composed vectors are smoother than real ones (no cross-sentence attention), and every base
text appears in about `2 (N - base) / base` pairs, so chunks sharing a sentence are correlated (cosine
about 0.5 to 0.8), not near duplicates. That is harder for HNSW than a handful of perturbed copies
(which flatter recall) and softer than fully independent texts; recall is reported as measured on it.
"""

from __future__ import annotations

import json
import random
import re
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from pathlib import Path

    import numpy as np
    import numpy.typing as npt

SENTENCE_BOUNDARY: Final = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(])")
MIN_SENTENCE_CHARS: Final = 30
MAX_SENTENCE_CHARS: Final = 600
"""Long texts would be truncated by the model (256 tokens) and break the pooling identity for pairs."""


def split_sentences(text: str) -> list[str]:
    """Sentences of `text` between MIN_ and MAX_SENTENCE_CHARS, whitespace collapsed."""
    sentences = (" ".join(part.split()) for part in SENTENCE_BOUNDARY.split(text))
    return [sentence for sentence in sentences if MIN_SENTENCE_CHARS <= len(sentence) <= MAX_SENTENCE_CHARS]


def _corpus_texts(corpus: Path) -> Iterator[str]:
    with corpus.open(encoding="utf-8") as lines:
        for line in lines:
            yield str(json.loads(line)["text"])


def base_texts(datasets: Path, *, seed: int = 0) -> list[str]:
    """Distinct real sentences of `datasets/scifact` and `datasets/locomo`, in a seeded shuffled order."""
    seen: set[str] = set()
    texts: list[str] = []
    for name in ("scifact", "locomo"):
        for text in _corpus_texts(datasets / name / "corpus.jsonl"):
            for sentence in split_sentences(text):
                if sentence not in seen:
                    seen.add(sentence)
                    texts.append(sentence)
    random.Random(seed).shuffle(texts)
    return texts


def compose_pairs(count: int, base_count: int, *, seed: int = 0) -> list[tuple[int, int]]:
    """`count` distinct unordered pairs (a, b), a < b < base_count, in a seeded order."""
    possible = base_count * (base_count - 1) // 2
    if count > possible:
        msg = f"{count} pairs asked of {base_count} base texts, which make only {possible}"
        raise ValueError(msg)
    generator = random.Random(seed)
    chosen: set[tuple[int, int]] = set()
    pairs: list[tuple[int, int]] = []
    while len(pairs) < count:
        first, second = generator.randrange(base_count), generator.randrange(base_count)
        if first == second:
            continue
        pair = (min(first, second), max(first, second))
        if pair not in chosen:
            chosen.add(pair)
            pairs.append(pair)
    return pairs


def chunk_plan(size: int, base_count: int, *, seed: int = 0) -> list[tuple[int, int | None]]:
    """What each of `size` chunks is: `(a, None)` a base text, `(a, b)` the concatenation of two."""
    singles = min(size, base_count)
    plan: list[tuple[int, int | None]] = [(index, None) for index in range(singles)]
    plan.extend(compose_pairs(size - singles, base_count, seed=seed))
    return plan


def chunk_text(texts: Sequence[str], entry: tuple[int, int | None]) -> str:
    first, second = entry
    return texts[first] if second is None else f"{texts[first]} {texts[second]}"


def pair_vectors(
    pooled: npt.NDArray[np.float32],
    token_counts: npt.NDArray[np.int32],
    plan: Sequence[tuple[int, int | None]],
) -> npt.NDArray[np.float32]:
    """Unit vectors of the planned chunks: a base text's own vector, or the token-weighted pooled mix."""
    import numpy as np  # noqa: PLC0415 - scripts import this module without numpy for the pure parts

    first = np.fromiter((entry[0] for entry in plan), dtype=np.int64, count=len(plan))
    second = np.fromiter((-1 if entry[1] is None else entry[1] for entry in plan), dtype=np.int64, count=len(plan))
    weights = token_counts.astype(np.float32)
    mixed = pooled[first] * weights[first, None]
    has_second = second >= 0
    mixed[has_second] += pooled[second[has_second]] * weights[second[has_second], None]
    norms = np.linalg.norm(mixed, axis=1, keepdims=True)
    result: npt.NDArray[np.float32] = (mixed / np.maximum(norms, 1e-12)).astype(np.float32)
    return result


def recall_at_k(approximate: Sequence[Sequence[str]], exact: Sequence[Sequence[str]], *, k: int) -> float:
    """Mean over queries of |approx top-k ∩ exact top-k| / |exact top-k| (queries with no exact hits skipped)."""
    ratios = [
        len(set(found[:k]) & set(truth[:k])) / len(truth[:k])
        for found, truth in zip(approximate, exact, strict=True)
        if truth
    ]
    if not ratios:
        msg = "recall of no queries"
        raise ValueError(msg)
    return sum(ratios) / len(ratios)
