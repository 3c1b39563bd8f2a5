"""Micro-batching: queries that arrive together are embedded in one forward pass.

One worker thread owns the query encoder. It takes the first waiting request, then everything else
already queued (and what arrives within `wait_s`), up to `max_texts`, runs one pass and hands each
caller its own rows. While a pass runs, new requests queue up, so under load batches form by
themselves; with one caller a request waits for nothing but `wait_s`.

The worker is a plain thread with thread-safe futures, not an asyncio task, so one batcher serves
every event loop (tests run several) and synchronous callers alike.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

Vectors = list[list[float]]

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class _Request:
    texts: list[str]
    future: Future[Vectors] = field(default_factory=Future)


class MicroBatcher:
    """Runs `encode` on a worker thread over batches of concurrently submitted texts."""

    def __init__(
        self,
        encode: Callable[[Sequence[str]], Vectors],
        *,
        max_texts: int,
        wait_s: float,
        name: str = "query-embedder",
        on_batch: Callable[[int], None] | None = None,
    ) -> None:
        if max_texts < 1 or wait_s < 0:
            msg = f"max_texts must be >= 1 and wait_s >= 0, got {max_texts} and {wait_s}"
            raise ValueError(msg)
        self._encode, self._max_texts, self._wait_s = encode, max_texts, wait_s
        self._on_batch = on_batch
        self._queue: queue.SimpleQueue[_Request | None] = queue.SimpleQueue()
        self._start_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._name = name
        self._closed = False

    def submit(self, texts: Sequence[str]) -> Future[Vectors]:
        """A future of one vector per text, in order; empty input resolves at once."""
        request = _Request(list(texts))
        if not request.texts:
            request.future.set_result([])
            return request.future
        with self._start_lock:
            if self._closed:
                msg = "the query embedder is closed"
                raise RuntimeError(msg)
            if self._thread is None or not self._thread.is_alive():  # started once; again should it ever end
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
        self._queue.put(request)
        return request.future

    def close(self) -> None:
        """Finish what is queued, then stop the worker thread."""
        with self._start_lock:
            self._closed = True
            thread = self._thread
        if thread is not None:
            self._queue.put(None)
            thread.join()

    def _collect(self, first: _Request) -> tuple[list[_Request], bool]:
        """`first` plus whatever else is queued or arrives within the wait; True when told to stop."""
        batch, size = [first], len(first.texts)
        deadline = time.monotonic() + self._wait_s
        while size < self._max_texts:
            remaining = deadline - time.monotonic()
            try:
                item = self._queue.get(timeout=remaining) if remaining > 0 else self._queue.get_nowait()
            except queue.Empty:
                break
            if item is None:
                return batch, True
            batch.append(item)
            size += len(item.texts)
        return batch, False

    def _run(self) -> None:
        stopping = False
        while not stopping:
            first = self._queue.get()
            if first is None:
                return
            batch, stopping = self._collect(first)
            try:
                self._serve(batch)
            except Exception:  # the thread serves every later query: it must outlive any one batch
                logger.exception("query embedding batch failed unexpectedly")

    def _serve(self, batch: list[_Request]) -> None:
        # A caller that gave up (its search timed out: `asyncio.wrap_future` cancels this future) is left
        # out, its texts not encoded; the rest can no longer be cancelled. Setting a result on a cancelled
        # future raised `InvalidStateError` here and killed the thread: every later query then waited for
        # its timeout, the semantic leg lost until a restart.
        batch = [request for request in batch if request.future.set_running_or_notify_cancel()]
        if not batch:
            return
        texts = [text for request in batch for text in request.texts]
        try:
            vectors = self._encode(texts)
        except BaseException as error:  # noqa: BLE001 - every caller of the batch gets the failure
            for request in batch:
                request.future.set_exception(error)
            return
        if self._on_batch is not None:
            self._on_batch(len(texts))
        start = 0
        for request in batch:
            end = start + len(request.texts)
            request.future.set_result(vectors[start:end])
            start = end
