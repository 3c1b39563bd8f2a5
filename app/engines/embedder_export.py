"""Export a bundled sentence-transformers model to ONNX once, into the data directory.

The file is named by model and a hash of the weights, so a changed model never reuses a stale export,
and is written to a temporary name then renamed: two processes starting together each write their own
file and the last rename wins, with identical content. Nothing is fetched from a model hub.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import tempfile
import warnings
from pathlib import Path
from typing import Any

EXPORT_FORMAT = 1
"""Bumped when the exported graph changes (inputs, pooling), so older exports are not reused."""
ONNX_OPSET = 17
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
OUTPUT_NAME = "embedding"
WEIGHT_SUFFIXES = (".safetensors", ".bin")
HASH_CHUNK_BYTES = 1 << 20


def weights_digest(model_dir: Path) -> str:
    """SHA-256 (16 hex digits) over the model's weight and config files, in name order."""
    digest = hashlib.sha256(f"format={EXPORT_FORMAT}".encode())
    files = sorted(
        path
        for path in model_dir.rglob("*")
        if path.is_file() and (path.suffix in WEIGHT_SUFFIXES or path.suffix == ".json")
    )
    for path in files:
        digest.update(str(path.relative_to(model_dir)).encode())
        with path.open("rb") as handle:
            while block := handle.read(HASH_CHUNK_BYTES):
                digest.update(block)
    return digest.hexdigest()[:16]


def export_path(model_dir: Path, *, model_name: str, folder: Path) -> Path:
    """Where this model's export lives in `folder` (it may not exist yet)."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", model_name).strip("-").lower() or "model"
    return folder / f"{slug}-{weights_digest(model_dir)}.onnx"


def _pooled_encoder(transformer: Any) -> Any:  # noqa: ANN401 - torch modules are untyped here
    """Transformer, mean pooling over real tokens, L2 normalisation: what sentence-transformers computes."""
    import torch  # noqa: PLC0415 - torch is imported only to export

    class Pooled(torch.nn.Module):
        def __init__(self, inner: Any) -> None:  # noqa: ANN401 - a transformers model
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:  # noqa: ANN401 - tensors
            hidden = self.inner(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            # Same order of operations as sentence-transformers' Pooling(mean) and Normalize.
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2, dim=1)

    return Pooled(transformer).eval()


def export_onnx(model: Any, target: Path) -> Path:  # noqa: ANN401 - a SentenceTransformer
    """Export `model` (a loaded SentenceTransformer: Transformer, mean Pooling, Normalize) to `target`.

    Raises:
        ValueError: the model is not a plain BERT-style mean-pooled model this export reproduces.
    """
    import torch  # noqa: PLC0415 - only exporting needs torch

    modules = [type(module).__name__ for module in model]
    if modules[:2] != ["Transformer", "Pooling"] or getattr(model[1], "pooling_mode", None) not in {"mean", ("mean",)}:
        msg = f"only mean-pooled transformer models are exported, this one is {modules}"
        raise ValueError(msg)
    encoder = _pooled_encoder(model[0].auto_model)
    sample = model.tokenizer(["warm up", "a longer sample sentence"], padding=True, return_tensors="pt")
    if "token_type_ids" not in sample:
        msg = "the tokenizer gives no token_type_ids"
        raise ValueError(msg)
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.stem}-", suffix=".tmp")
    os.close(handle)
    try:
        axes = {name: {0: "batch", 1: "tokens"} for name in INPUT_NAMES}
        with warnings.catch_warnings(), torch.inference_mode():
            # The tracer warns about Python-side shape checks that are constant for this graph.
            warnings.simplefilter("ignore")
            torch.onnx.export(
                encoder,
                tuple(sample[name] for name in INPUT_NAMES),
                temporary,
                input_names=list(INPUT_NAMES),
                output_names=[OUTPUT_NAME],
                dynamic_axes={**axes, OUTPUT_NAME: {0: "batch"}},
                opset_version=ONNX_OPSET,
                dynamo=False,
            )
        Path(temporary).chmod(0o644)  # mkstemp's 0600 would hide it from a process of another user
        Path(temporary).replace(target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            Path(temporary).unlink()
    return target
