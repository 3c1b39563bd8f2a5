"""The vector cache of the scale benchmark: base texts embedded once with the real model, in blocks.

Each block of BLOCK_TEXTS texts is one `.npz` under the cache folder (pooled vectors before
normalisation, token counts, and a hash of the texts so a changed corpus never reuses stale vectors).
Embedding can stop at any time; the next run continues from the last whole block.
"""

from __future__ import annotations

import hashlib
import sys
import time
import zipfile
from typing import TYPE_CHECKING, Any, Final

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    import numpy.typing as npt

BLOCK_TEXTS: Final = 1000


def _block_path(cache: Path, index: int) -> Path:
    return cache / f"base-{index:05d}.npz"


def _texts_digest(texts: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(texts).encode()).hexdigest()


def pooling_model() -> Any:  # noqa: ANN401 - SentenceTransformer is untyped
    """The bundled all-MiniLM-L6-v2 without its Normalize module: mean-pooled vectors as they are."""
    from sentence_transformers import SentenceTransformer  # noqa: PLC0415 - heavy import, only when embedding

    from app.engines.embedder import packaged_model_path  # noqa: PLC0415 - as above

    # The weights the product loads (its pip package), as torch: the serving embedder wraps its model and
    # normalises, and pooled vectors must be taken before that.
    full = SentenceTransformer(str(packaged_model_path("all-MiniLM-L6-v2")), device="cpu")
    return SentenceTransformer(modules=[full[0], full[1]], device="cpu")


def token_counts(model: Any, texts: Sequence[str]) -> npt.NDArray[np.int32]:  # noqa: ANN401
    """Tokens the mean pooling averages over (with [CLS] and [SEP]), capped at the model's max length."""
    encoded = model.tokenizer(list(texts), truncation=True, max_length=model.max_seq_length)["input_ids"]
    return np.array([len(ids) for ids in encoded], dtype=np.int32)


def embed_base_texts(texts: Sequence[str], cache: Path, *, count: int, batch_size: int = 64) -> None:
    """Embed the first `count` texts (rounded up to whole blocks) into `cache`, skipping blocks already there."""
    cache.mkdir(parents=True, exist_ok=True)
    model = None
    for block in range((count + BLOCK_TEXTS - 1) // BLOCK_TEXTS):
        block_texts = list(texts[block * BLOCK_TEXTS : (block + 1) * BLOCK_TEXTS])
        if not block_texts:
            break
        path = _block_path(cache, block)
        digest = _texts_digest(block_texts)
        if path.exists() and str(np.load(path)["digest"]) == digest:
            continue
        if model is None:
            model = pooling_model()
        started = time.perf_counter()
        pooled = model.encode(block_texts, batch_size=batch_size, convert_to_numpy=True, show_progress_bar=False)
        partial = path.with_suffix(".partial.npz")
        np.savez(partial, pooled=pooled.astype(np.float32), tokens=token_counts(model, block_texts), digest=digest)
        partial.replace(path)  # readers never see half a block
        rate = len(block_texts) / (time.perf_counter() - started)
        print(f"embedded block {block} ({len(block_texts)} texts, {rate:.0f} texts/s)", file=sys.stderr, flush=True)


def load_base_vectors(texts: Sequence[str], cache: Path) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int32]]:
    """Every consecutive valid block from the first: (pooled vectors, token counts) of texts[:returned]."""
    pooled: list[npt.NDArray[np.float32]] = []
    tokens: list[npt.NDArray[np.int32]] = []
    block = 0
    while (path := _block_path(cache, block)).exists():
        block_texts = texts[block * BLOCK_TEXTS : (block + 1) * BLOCK_TEXTS]
        try:
            stored = np.load(path)
            valid = str(stored["digest"]) == _texts_digest(block_texts)
        except (OSError, ValueError, zipfile.BadZipFile):
            valid = False  # a block another process is still writing
        if not valid:
            break
        pooled.append(stored["pooled"])
        tokens.append(stored["tokens"])
        block += 1
    if not pooled:
        msg = f"no embedded base texts in {cache}: run `bench_scale.py embed` first"
        raise RuntimeError(msg)
    return np.concatenate(pooled), np.concatenate(tokens)
