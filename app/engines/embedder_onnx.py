"""ONNX Runtime encoder over an exported sentence-transformers model (`embedder_export.py`).

Two sessions over one file: one for queries and one for ingestion, each with its own threads, so a
query never waits for an ingest batch to release a lock. Batches are padded to their longest text only.
"""

from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING, Any

import numpy as np

from app.engines.embedder_export import INPUT_NAMES, OUTPUT_NAME

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

DEFAULT_MAX_TOKENS = 256


def _session(model_file: Path, *, threads: int) -> Any:  # noqa: ANN401 - onnxruntime is untyped
    import onnxruntime  # noqa: PLC0415 - loaded only with the onnx backend

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads  # 0: one per physical core (onnxruntime's default)
    options.inter_op_num_threads = 1
    # Spinning workers burn a core between calls; on a small shared CPU budget that time belongs to
    # the other leg of the query and to PostgreSQL.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return onnxruntime.InferenceSession(str(model_file), options, providers=["CPUExecutionProvider"])


def _max_tokens(model_dir: Path) -> int:
    config = model_dir / "sentence_bert_config.json"
    if config.is_file():
        value = json.loads(config.read_text(encoding="utf-8")).get("max_seq_length")
        if isinstance(value, int) and value > 0:
            return value
    return DEFAULT_MAX_TOKENS


class OnnxEncoder:
    """Tokenise and run one ONNX session; `encode` is called from one thread at a time per instance."""

    def __init__(self, model_file: Path, model_dir: Path, *, threads: int) -> None:
        from tokenizers import Tokenizer  # noqa: PLC0415 - loaded only with the onnx backend

        self._tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self._tokenizer.enable_truncation(max_length=_max_tokens(model_dir))
        self._tokenizer.enable_padding()  # to the longest text of each batch, not to max length
        self._session = _session(model_file, threads=threads)
        self._guard = threading.Lock()  # uncontended: each instance has one caller thread
        self.dimensions = int(self._session.get_outputs()[0].shape[-1])

    @property
    def lowercases(self) -> bool:
        """Whether the tokenizer lowercases its input (then case never changes a vector)."""
        normalizer = self._tokenizer.normalizer
        return bool(normalizer is not None and getattr(normalizer, "lowercase", False))

    def encode(self, texts: Sequence[str]) -> list[list[float]]:
        """Unit-length vectors for `texts`, in order, in one forward pass."""
        if not texts:
            return []
        with self._guard:
            encodings = self._tokenizer.encode_batch(list(texts))
            feeds = {
                "input_ids": np.array([item.ids for item in encodings], dtype=np.int64),
                "attention_mask": np.array([item.attention_mask for item in encodings], dtype=np.int64),
                "token_type_ids": np.array([item.type_ids for item in encodings], dtype=np.int64),
            }
            (matrix,) = self._session.run([OUTPUT_NAME], {name: feeds[name] for name in INPUT_NAMES})
        return [row.tolist() for row in matrix]
