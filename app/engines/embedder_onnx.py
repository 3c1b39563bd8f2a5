"""ONNX Runtime encoder over an exported sentence-transformers model (`embedder_export.py`).

Two sessions over one file: one for queries and one for ingestion, each with its own threads, so a
query never waits for an ingest batch to release a lock. A call's texts are run in groups of similar
token length, each padded to its own longest text: a pass costs in proportion to padded tokens, so one
long text no longer makes every short text in a micro-batch as expensive as itself.
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
PADDING_SLACK = 1.25
"""A group's longest text is at most this many times its shortest (plus `PADDING_SLACK_TOKENS`)."""
PADDING_SLACK_TOKENS = 2


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
        self._tokenizer.enable_padding()  # only to learn the model's padding id: `encode` pads per group
        self._pad_id = int((self._tokenizer.padding or {}).get("pad_id", 0))
        self._tokenizer.no_padding()
        self._session = _session(model_file, threads=threads)
        self._guard = threading.Lock()  # uncontended: each instance has one caller thread
        self.dimensions = int(self._session.get_outputs()[0].shape[-1])

    @property
    def lowercases(self) -> bool:
        """Whether the tokenizer lowercases its input (then case never changes a vector)."""
        normalizer = self._tokenizer.normalizer
        return bool(normalizer is not None and getattr(normalizer, "lowercase", False))

    def encode(self, texts: Sequence[str]) -> list[list[float]]:
        """Unit-length vectors for `texts`, in order: one forward pass per group of similar token length."""
        if not texts:
            return []
        vectors: list[list[float]] = [[] for _ in texts]
        with self._guard:
            encodings = self._tokenizer.encode_batch(list(texts))  # unpadded: padding is per group below
            for group in length_groups([len(item.ids) for item in encodings]):
                width = max(len(encodings[position].ids) for position in group)
                feeds = {name: np.zeros((len(group), width), dtype=np.int64) for name in INPUT_NAMES}
                feeds["input_ids"].fill(self._pad_id)
                for row, position in enumerate(group):
                    item = encodings[position]
                    size = len(item.ids)
                    feeds["input_ids"][row, :size] = item.ids
                    feeds["attention_mask"][row, :size] = item.attention_mask
                    feeds["token_type_ids"][row, :size] = item.type_ids
                (matrix,) = self._session.run([OUTPUT_NAME], feeds)
                for row, position in enumerate(group):
                    vectors[position] = matrix[row].tolist()
        return vectors


def length_groups(lengths: Sequence[int]) -> list[list[int]]:
    """Positions of `lengths` in groups of similar length, shortest first, each group in ascending length.

    Every position is in exactly one group. Within a group the longest is at most `PADDING_SLACK` times
    the shortest plus `PADDING_SLACK_TOKENS`, so padding wastes at most about a quarter of a pass.
    """
    groups: list[list[int]] = []
    shortest = 0
    for position in sorted(range(len(lengths)), key=lambda index: (lengths[index], index)):
        if groups and lengths[position] <= shortest * PADDING_SLACK + PADDING_SLACK_TOKENS:
            groups[-1].append(position)
        else:
            groups.append([position])
            shortest = lengths[position]
    return groups
