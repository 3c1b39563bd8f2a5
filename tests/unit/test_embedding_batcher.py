"""Micro-batching of query embeddings and the query-embedding cache, over a fake encoder (pure unit)."""

from __future__ import annotations

import asyncio
import threading
from typing import TYPE_CHECKING

import pytest

from app.domain.errors import EngineUnavailableError
from app.engines.embedder import EmbedderOptions, ModelIdentity, QueryEmbeddingCache, ServingEmbedder
from app.engines.embedding_batcher import MicroBatcher

if TYPE_CHECKING:
    from collections.abc import Sequence


class GatedEncoder:
    """Encodes text as [len(text), position in its batch]; the first pass waits for `gate`."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.first_pass_started = threading.Event()
        self.gate = threading.Event()

    def encode(self, texts: Sequence[str]) -> list[list[float]]:
        self.batches.append(list(texts))
        if len(self.batches) == 1:
            self.first_pass_started.set()
            self.gate.wait(timeout=30)
        return [[float(len(text)), float(position)] for position, text in enumerate(texts)]


async def test_queries_arriving_during_a_pass_share_the_next_pass_and_each_gets_its_own_vector() -> None:
    encoder = GatedEncoder()
    batcher = MicroBatcher(encoder.encode, max_texts=32, wait_s=0.0)
    first = asyncio.wrap_future(batcher.submit(["a"]))
    await asyncio.to_thread(encoder.first_pass_started.wait, 30)
    waiting = [asyncio.wrap_future(batcher.submit(["b" * size])) for size in (2, 3, 4)]
    pair = asyncio.wrap_future(batcher.submit(["x" * 5, "y" * 6]))

    encoder.gate.set()
    results = await asyncio.gather(first, *waiting, pair)
    batcher.close()

    assert encoder.batches == [["a"], ["bb", "bbb", "bbbb", "xxxxx", "yyyyyy"]]
    assert results == [[[1.0, 0.0]], [[2.0, 0.0]], [[3.0, 1.0]], [[4.0, 2.0]], [[5.0, 3.0], [6.0, 4.0]]]


async def test_a_batch_never_grows_past_max_texts() -> None:
    encoder = GatedEncoder()
    batcher = MicroBatcher(encoder.encode, max_texts=2, wait_s=0.0)
    first = asyncio.wrap_future(batcher.submit(["a"]))
    await asyncio.to_thread(encoder.first_pass_started.wait, 30)
    rest = [asyncio.wrap_future(batcher.submit([str(number)])) for number in range(5)]

    encoder.gate.set()
    await asyncio.gather(first, *rest)
    batcher.close()

    assert [len(batch) for batch in encoder.batches] == [1, 2, 2, 1]


async def test_a_failing_pass_fails_every_caller_of_that_batch_and_the_next_pass_still_runs() -> None:
    calls: list[list[str]] = []

    def encode(texts: Sequence[str]) -> list[list[float]]:
        calls.append(list(texts))
        if "boom" in texts:
            message = "model failed"
            raise RuntimeError(message)
        return [[1.0] for _ in texts]

    batcher = MicroBatcher(encode, max_texts=8, wait_s=0.0)

    with pytest.raises(RuntimeError, match="model failed"):
        await asyncio.wrap_future(batcher.submit(["boom"]))
    after = await asyncio.wrap_future(batcher.submit(["fine"]))
    batcher.close()

    assert after == [[1.0]]
    assert calls == [["boom"], ["fine"]]


def test_empty_input_resolves_without_a_pass() -> None:
    batcher = MicroBatcher(lambda texts: [[1.0] for _ in texts], max_texts=4, wait_s=0.0)

    assert batcher.submit([]).result(timeout=1) == []


def test_a_closed_batcher_refuses_work() -> None:
    batcher = MicroBatcher(lambda texts: [[1.0] for _ in texts], max_texts=4, wait_s=0.0)
    batcher.close()

    with pytest.raises(RuntimeError, match="closed"):
        batcher.submit(["late"])


def test_cache_keys_ignore_whitespace_and_case_only_for_an_uncased_model() -> None:
    uncased = QueryEmbeddingCache(8, lowercase=True)
    cased = QueryEmbeddingCache(8, lowercase=False)

    assert uncased.key("m", "  Vitamin   D\tbone ") == uncased.key("m", "vitamin d bone")
    assert cased.key("m", "Vitamin D") != cased.key("m", "vitamin d")
    assert uncased.key("model-a", "q") != uncased.key("model-b", "q")


def test_cache_evicts_the_projects_least_recently_used_vector() -> None:
    cache = QueryEmbeddingCache(2, lowercase=False)
    a, b, c = (cache.key("m", text, scope="alpha") for text in ("a", "b", "c"))
    cache.put(a, [1.0])
    cache.put(b, [2.0])
    assert cache.get(a) == [1.0]  # "a" is now the most recent

    cache.put(c, [3.0])

    assert (cache.get(a), cache.get(b), cache.get(c)) == ([1.0], None, [3.0])


def test_a_cache_of_size_zero_keeps_nothing() -> None:
    cache = QueryEmbeddingCache(0, lowercase=False)

    cache.put("a", [1.0])

    assert cache.get("a") is None


async def test_any_encoder_failure_reaches_callers_as_the_engine_error() -> None:
    class BrokenEncoder:
        def encode(self, texts: Sequence[str]) -> list[list[float]]:
            message = f"runtime failure on {len(texts)} texts"
            raise Exception(message)  # onnxruntime's errors derive from Exception alone

    broken = BrokenEncoder()
    serving = ServingEmbedder(broken, lambda: broken, model=ModelIdentity("fake", 2, "onnx"), options=EmbedderOptions())

    with pytest.raises(EngineUnavailableError, match="embedding failed"):
        await serving.embed_query("q")
    with pytest.raises(EngineUnavailableError, match="embedding failed"):
        await serving.embed_documents(["p"])
    serving.close()


async def test_a_caller_that_gave_up_is_left_out_and_the_worker_serves_every_later_query() -> None:
    # A search that timed out cancels its future; setting its result killed the worker thread, and every
    # later query then waited for its own timeout (the semantic leg lost until a restart).
    encoder = GatedEncoder()
    batcher = MicroBatcher(encoder.encode, max_texts=32, wait_s=0.0)
    first = asyncio.wrap_future(batcher.submit(["a"]))
    await asyncio.to_thread(encoder.first_pass_started.wait, 30)
    abandoned = batcher.submit(["gave up"])
    kept = asyncio.wrap_future(batcher.submit(["kept"]))
    assert abandoned.cancel()

    encoder.gate.set()
    served = await asyncio.wait_for(asyncio.gather(first, kept), timeout=10)
    later = await asyncio.wait_for(asyncio.wrap_future(batcher.submit(["later"])), timeout=10)
    batcher.close()

    assert served == [[[1.0, 0.0]], [[4.0, 0.0]]]
    assert encoder.batches == [["a"], ["kept"], ["later"]]  # the abandoned text was never encoded
    assert later == [[5.0, 0.0]]


async def test_a_caller_cancelled_while_its_pass_runs_gets_nothing_and_the_worker_lives_on() -> None:
    encoder = GatedEncoder()
    batcher = MicroBatcher(encoder.encode, max_texts=32, wait_s=0.0)
    running = batcher.submit(["a"])
    await asyncio.to_thread(encoder.first_pass_started.wait, 30)

    assert not running.cancel()  # being encoded: too late to cancel, the result is simply not awaited
    encoder.gate.set()
    later = await asyncio.wait_for(asyncio.wrap_future(batcher.submit(["bb"])), timeout=10)
    batcher.close()

    assert running.result() == [[1.0, 0.0]]
    assert later == [[2.0, 0.0]]
