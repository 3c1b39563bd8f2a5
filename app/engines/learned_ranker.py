"""The learned second stage: a linear model over both legs' evidence, read from a small versioned JSON file.

Inference is plain Python (20 features, a few dozen candidates): no numpy or scikit-learn at run time.
The bundled model is trained by `scripts/train_reranker.py` on training data only (SciFact's train
split, LoCoMo's tuning conversations); the file records how (`training`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from app.retrieval.rerank import order_by_scores
from app.retrieval.rerank_features import FEATURE_NAMES, candidate_features

if TYPE_CHECKING:
    from collections.abc import Sequence

    from app.domain.models import FusedHit, RerankQuery

MODEL_FORMAT: Final = "poimen-linear-ranker"
MODEL_FORMAT_VERSION: Final = 1
BUNDLED_MODEL: Final = Path(__file__).parent / "models" / "learned-ranker-v1.json"


class RankerModelError(ValueError):
    """A ranker model file that cannot be used; the message names the file and why."""


@dataclass(frozen=True, slots=True)
class LinearRankerModel:
    """score = bias + sum(weight * (feature - mean) / scale); higher is better."""

    features: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    weights: tuple[float, ...]
    bias: float
    version: str

    @classmethod
    def from_file(cls, path: Path) -> LinearRankerModel:
        """Read and check a model file; raises `RankerModelError` naming what is wrong."""
        try:
            document: Any = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            msg = f"ranker model {path}: cannot be read ({error})"
            raise RankerModelError(msg) from None
        if not isinstance(document, dict) or document.get("format") != MODEL_FORMAT:
            msg = f"ranker model {path}: not a {MODEL_FORMAT} file"
            raise RankerModelError(msg)
        if document.get("format_version") != MODEL_FORMAT_VERSION:
            msg = (
                f"ranker model {path}: format_version {document.get('format_version')}, expected {MODEL_FORMAT_VERSION}"
            )
            raise RankerModelError(msg)
        features = tuple(document.get("features", ()))
        if features != FEATURE_NAMES:
            msg = f"ranker model {path}: trained on other features than this service computes ({list(features)})"
            raise RankerModelError(msg)
        try:
            model = cls(
                features=features,
                mean=tuple(float(value) for value in document["mean"]),
                scale=tuple(float(value) for value in document["scale"]),
                weights=tuple(float(value) for value in document["weights"]),
                bias=float(document["bias"]),
                version=str(document["version"]),
            )
        except (KeyError, TypeError, ValueError) as error:
            msg = f"ranker model {path}: bad or missing field ({error})"
            raise RankerModelError(msg) from None
        sizes = {len(model.mean), len(model.scale), len(model.weights)}
        if sizes != {len(features)} or not all(math.isfinite(value) and value > 0 for value in model.scale):
            msg = f"ranker model {path}: mean, scale and weights need one finite value per feature (scale > 0)"
            raise RankerModelError(msg)
        return model

    def score(self, row: Sequence[float]) -> float:
        """The model's score of one feature vector."""
        return self.bias + math.fsum(
            weight * (value - mean) / scale
            for weight, value, mean, scale in zip(self.weights, row, self.mean, self.scale, strict=True)
        )


class LearnedRanker:
    """`Reranker` scoring each candidate with a `LinearRankerModel` over `candidate_features`."""

    name = "learned"

    def __init__(self, model: LinearRankerModel) -> None:
        self._model = model

    @classmethod
    def from_file(cls, path: Path | None = None) -> LearnedRanker:
        """The ranker over the model at `path`, or the bundled one."""
        return cls(LinearRankerModel.from_file(path or BUNDLED_MODEL))

    @property
    def model_version(self) -> str:
        """The model file's `version`."""
        return self._model.version

    async def rerank(self, query: RerankQuery, candidates: Sequence[FusedHit]) -> list[FusedHit]:
        """Score and order the candidates; pure Python, well under a millisecond for the default top-N."""
        rows = candidate_features(query, candidates)
        return order_by_scores(candidates, [self._model.score(row) for row in rows])
