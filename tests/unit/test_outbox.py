from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

import pytest

from app.domain.errors import EngineRejectedError, EngineTimeoutError, EngineUnavailableError
from app.domain.models import Chunk, DocumentChunks, OutboxStats, ScoredHit, StoredDocument
from app.ingestion.outbox import OutboxWorker

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from app.domain.models import EmbeddedChunk, Filters, LexicalQuery


def chunk(project_id: str, document_id: str, text: str) -> Chunk:
    return Chunk(
        chunk_id=f"{document_id}#0",
        document_id=document_id,
        project_id=project_id,
        text=text,
        source=document_id,
        level="L0",
        breadcrumb=(document_id,),
        section_title=document_id,
        position=0,
    )


class OutboxStore:
    """The outbox half of DocumentStore: entries carry a version; completing an old version keeps the entry."""

    name = "outbox-store"

    def __init__(self) -> None:
        self.chunks: dict[tuple[str, str], tuple[Chunk, ...]] = {}
        self.outbox: dict[tuple[str, str], int] = {}
        self.version = 0
        self.claims = 0

    def write(self, project_id: str, document_id: str, text: str | None) -> None:
        self.version += 1
        key = (project_id, document_id)
        self.chunks[key] = () if text is None else (chunk(project_id, document_id, text),)
        self.outbox[key] = self.version

    async def claim_outbox(self, *, limit: int) -> list[DocumentChunks]:
        self.claims += 1
        keys = sorted(self.outbox, key=self.outbox.__getitem__)[:limit]
        return [DocumentChunks(p, d, self.chunks[(p, d)], outbox_version=self.outbox[(p, d)]) for p, d in keys]

    async def complete_outbox(self, documents: Sequence[DocumentChunks]) -> None:
        for document in documents:
            key = (document.project_id, document.document_id)
            if self.outbox.get(key) == document.outbox_version:
                del self.outbox[key]

    async def outbox_backlog(self) -> int:
        return len(self.outbox)

    async def release_outbox(self, documents: Sequence[DocumentChunks]) -> None:
        return None

    # The rest of DocumentStore: the worker never calls these.
    async def get_document(self, project_id: str, document_id: str) -> StoredDocument | None:
        raise NotImplementedError

    async def get_content_hash(self, project_id: str, document_id: str) -> str | None:
        raise NotImplementedError

    async def cached_embeddings(
        self, project_id: str, chunk_hashes: Sequence[str], *, model: str
    ) -> dict[str, list[float]]:
        raise NotImplementedError

    async def save_documents(self, documents: Sequence[tuple[StoredDocument, Sequence[EmbeddedChunk]]]) -> None:
        raise NotImplementedError

    async def delete_document(self, project_id: str, document_id: str) -> bool:
        raise NotImplementedError

    async def queue_project_for_reindex(self, project_id: str) -> int:
        raise NotImplementedError

    async def outbox_stats(self, *, through: int | None = None) -> OutboxStats:
        versions = [version for version in self.outbox.values() if through is None or version <= through]
        return OutboxStats(backlog=len(versions), oldest_age_s=0.0, newest_version=max(self.outbox.values(), default=0))

    async def ping(self) -> None:
        return None


class FlakyLexical:
    """A lexical index that raises for its first `failures` replace calls, then applies them."""

    name = "flaky-lexical"

    def __init__(self, failures: int = 0) -> None:
        self.failures = failures
        self.attempts = 0
        self.indexed: dict[tuple[str, str], tuple[str, ...]] = {}
        self.started = asyncio.Event()
        self.release: asyncio.Event | None = None

    async def replace_documents(self, documents: Sequence[DocumentChunks]) -> None:
        self.attempts += 1
        self.started.set()
        if self.release is not None:
            await self.release.wait()
        if self.attempts <= self.failures:
            raise EngineUnavailableError("connection refused", engine=self.name)
        for document in documents:
            key = (document.project_id, document.document_id)
            if document.chunks:
                self.indexed[key] = tuple(c.text for c in document.chunks)
            else:
                self.indexed.pop(key, None)

    # The rest of LexicalIndex: the worker never calls these.
    async def search(self, query: LexicalQuery, *, top_k: int, filters: Filters) -> list[ScoredHit]:
        raise NotImplementedError

    async def delete_project(self, project_id: str) -> None:
        raise NotImplementedError

    async def ping(self) -> None:
        return None


def worker(store: OutboxStore, lexical: FlakyLexical, **kwargs) -> OutboxWorker:
    settings = {"batch_size": 2, "poll_interval_s": 0.001, "max_backoff_s": 0.004} | kwargs
    return OutboxWorker(store=store, lexical=lexical, **settings)


async def test_drain_indexes_everything_in_batches() -> None:
    store, lexical = OutboxStore(), FlakyLexical()
    for name in "abcde":
        store.write("p", name, f"text {name}")

    indexed = await worker(store, lexical).drain(timeout_s=5)

    assert indexed == 5
    assert lexical.attempts == 3  # batches of 2, 2, 1
    assert store.outbox == {}
    assert lexical.indexed == {("p", n): (f"text {n}",) for n in "abcde"}


class WritingLexical(FlakyLexical):
    """A lexical index beside a writer that never stops: each batch it indexes, one more document is queued."""

    def __init__(self, store: OutboxStore, *, writes: int) -> None:
        super().__init__()
        self.store, self.writes = store, writes

    async def replace_documents(self, documents: Sequence[DocumentChunks]) -> None:
        await super().replace_documents(documents)
        if self.writes:
            self.writes -= 1
            self.store.write("other", f"written-{self.writes}", "written meanwhile")


async def test_drain_waits_for_what_was_queued_when_it_began_not_for_a_writer_that_keeps_queueing() -> None:
    # It ran until the outbox was empty: each cycle made progress, so its timeout (time without progress)
    # never came, and beside a writer that never stopped it never ended (here: until the 1,000 writes ran out).
    store = OutboxStore()
    for name in "abcde":
        store.write("p", name, f"text {name}")
    lexical = WritingLexical(store, writes=1_000)

    outbox = worker(store, lexical)
    indexed = await outbox.drain(timeout_s=5)

    assert {("p", name) for name in "abcde"} <= lexical.indexed.keys()
    assert indexed == 6  # batches of 2: a b, c d, e and the first document written meanwhile
    assert lexical.writes == 1_000 - 3
    assert (await outbox.backlog(), len(store.outbox)) == (0, 2)  # what the drain waited for; what it did not


async def test_drain_survives_failures_and_loses_nothing() -> None:
    store, lexical = OutboxStore(), FlakyLexical(failures=3)
    for name in "abc":
        store.write("p", name, f"text {name}")

    indexed = await worker(store, lexical).drain(timeout_s=5)

    assert indexed == 3
    assert lexical.attempts == 3 + 2
    assert store.outbox == {}
    assert set(lexical.indexed) == {("p", "a"), ("p", "b"), ("p", "c")}


async def test_drain_gives_up_after_its_timeout_and_keeps_the_entries() -> None:
    store, lexical = OutboxStore(), FlakyLexical(failures=10**6)
    store.write("p", "a", "text")

    with pytest.raises(EngineTimeoutError) as raised:
        await worker(store, lexical).drain(timeout_s=0.05)

    assert raised.value.engine == "flaky-lexical"
    assert "connection refused" in raised.value.message
    assert store.outbox == {("p", "a"): 1}


class SlowLexical(FlakyLexical):
    """A lexical index that takes `batch_s` for each batch, as a real one takes time per document."""

    def __init__(self, batch_s: float) -> None:
        super().__init__()
        self.batch_s = batch_s

    async def replace_documents(self, documents: Sequence[DocumentChunks]) -> None:
        await asyncio.sleep(self.batch_s)
        await super().replace_documents(documents)


async def test_drain_runs_past_its_timeout_while_each_batch_makes_progress() -> None:
    # The timeout bounded the whole drain: `poimen import` of 25,000 chunks stopped draining after 30 s with
    # 6,318 of 18,118 documents queued, exited 0, and a search right after missed them on the lexical leg.
    store, lexical = OutboxStore(), SlowLexical(batch_s=0.01)
    for number in range(200):  # 100 batches of 2: at least 1 s in all, 0.01 s each
        store.write("p", f"d{number}", "text")

    indexed = await worker(store, lexical).drain(timeout_s=0.5)

    assert indexed == 200
    assert store.outbox == {}


async def test_deletes_reach_the_index() -> None:
    store, lexical = OutboxStore(), FlakyLexical()
    store.write("p", "a", "text")
    await worker(store, lexical).drain(timeout_s=5)
    store.write("p", "a", None)

    await worker(store, lexical).drain(timeout_s=5)

    assert lexical.indexed == {}


async def test_a_write_during_indexing_stays_queued() -> None:
    store, lexical = OutboxStore(), FlakyLexical()
    store.write("p", "a", "old")
    lexical.release = asyncio.Event()
    outbox = worker(store, lexical)
    first_cycle = asyncio.create_task(outbox.run_once())
    await lexical.started.wait()

    store.write("p", "a", "new")
    lexical.release.set()
    await first_cycle

    assert store.outbox == {("p", "a"): 2}
    await outbox.drain(timeout_s=5)
    assert lexical.indexed == {("p", "a"): ("new",)}


async def test_on_indexed_names_each_project_once_per_batch() -> None:
    store, lexical = OutboxStore(), FlakyLexical()
    store.write("p2", "a", "x")
    store.write("p1", "b", "y")
    indexed_projects: list[str] = []

    await worker(store, lexical, batch_size=10, on_indexed=indexed_projects.append).drain(timeout_s=5)

    assert indexed_projects == ["p1", "p2"]


async def test_background_loop_recovers_from_failures_and_reports_them(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="poimen.outbox")
    store, lexical = OutboxStore(), FlakyLexical(failures=2)
    errors: list[Exception] = []
    indexed = asyncio.Event()
    outbox = worker(store, lexical, on_error=errors.append, on_indexed=lambda _: indexed.set())
    store.write("p", "a", "text")

    outbox.start()
    await asyncio.wait_for(indexed.wait(), timeout=5)
    await outbox.stop()

    assert [type(e) for e in errors] == [EngineUnavailableError, EngineUnavailableError]
    # Writes wait while the cycles fail: the log says so and why, once per failed cycle.
    failures = [record.getMessage() for record in caplog.records if record.name == "poimen.outbox"]
    assert len(failures) == 2
    assert failures[0].startswith("lexical outbox cycle failed (1 in a row), retrying in")
    assert "EngineUnavailableError" in failures[1]
    assert store.outbox == {}
    assert outbox.consecutive_failures == 0
    assert not outbox.running


async def test_wake_skips_the_idle_wait() -> None:
    store, lexical = OutboxStore(), FlakyLexical()
    indexed = asyncio.Event()
    outbox = worker(store, lexical, poll_interval_s=60, on_indexed=lambda _: indexed.set())
    outbox.start()
    # The idle turn's empty batch comes after a claim that found nothing: from here only a wake (or the 60 s
    # poll) reaches the next write. A sleep here let a slow start's first claim find that write itself.
    await lexical.started.wait()

    store.write("p", "a", "text")
    outbox.wake()
    await asyncio.wait_for(indexed.wait(), timeout=5)
    await outbox.stop(timeout_s=5)

    assert lexical.indexed == {("p", "a"): ("text",)}


def worker_after_a_long_outage(store: OutboxStore, lexical: FlakyLexical, **kwargs) -> OutboxWorker:
    """A worker whose next failure backs off for its whole `max_backoff_s` of 600 s, as deep in an outage."""
    outbox = worker(store, lexical, max_backoff_s=600, **kwargs)
    outbox.consecutive_failures = 30
    return outbox


async def test_a_write_cuts_a_failure_backoff_short(caplog: pytest.LogCaptureFixture) -> None:
    # Before, a write woke only an idle worker: after an outage every new write missed the lexical leg
    # for up to max_backoff_s (30 s by default) after the engine came back.
    caplog.set_level(logging.WARNING, logger="poimen.outbox")
    store, lexical = OutboxStore(), FlakyLexical(failures=1)
    indexed = asyncio.Event()
    outbox = worker_after_a_long_outage(store, lexical, on_indexed=lambda _: indexed.set())
    store.write("p", "a", "queued during the outage")
    outbox.start()
    await lexical.started.wait()  # the cycle fails; the next scheduled retry is 600 s away

    store.write("p", "b", "written after the engine came back")
    outbox.wake()
    await asyncio.wait_for(indexed.wait(), timeout=5)
    await outbox.stop(timeout_s=5)

    assert lexical.indexed == {
        ("p", "a"): ("queued during the outage",),
        ("p", "b"): ("written after the engine came back",),
    }
    assert outbox.consecutive_failures == 0
    assert len(caplog.records) == 1
    assert caplog.records[0].getMessage().startswith("lexical outbox cycle failed (31 in a row), retrying in 600.0 s")


async def test_a_burst_of_writes_during_a_backoff_is_one_early_retry(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="poimen.outbox")
    poll_interval_s = 0.05
    store, lexical = OutboxStore(), FlakyLexical(failures=10**6)
    # The retry after the first failure is scheduled 10 poll intervals on: room for 9 early ones before it.
    outbox = worker(store, lexical, poll_interval_s=poll_interval_s, max_backoff_s=10 * poll_interval_s)
    outbox.consecutive_failures = 30
    store.write("p", "a", "text")
    outbox.start()
    await lexical.started.wait()

    for _ in range(1_000):
        outbox.wake()
    # The scheduled retry: every early retry the burst was to cause came before it.
    await until(lambda: outbox.consecutive_failures == 32)
    await outbox.stop(timeout_s=5)

    failures = [(record.levelno, record.getMessage()) for record in caplog.records if record.name == "poimen.outbox"]
    assert [level for level, _ in failures] == [logging.WARNING, logging.DEBUG, logging.WARNING]
    assert failures[0][1].startswith("lexical outbox cycle failed (31 in a row)")
    assert failures[1][1].startswith("early lexical outbox retry failed")
    assert failures[2][1].startswith("lexical outbox cycle failed (32 in a row)")
    assert lexical.attempts == 3
    assert store.outbox == {("p", "a"): 1}


async def test_writes_against_an_engine_that_stays_down_retry_at_most_once_per_poll_interval(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="poimen.outbox")
    poll_interval_s = 0.05
    store, lexical = OutboxStore(), FlakyLexical(failures=10**6)
    outbox = worker_after_a_long_outage(store, lexical, poll_interval_s=poll_interval_s)
    store.write("p", "a", "text")
    outbox.start()
    await lexical.started.wait()

    loop = asyncio.get_running_loop()
    storm_started = loop.time()
    for _ in range(200):  # a storm of writes: one every millisecond or so
        outbox.wake()
        await asyncio.sleep(0.001)
    storm_s = loop.time() - storm_started
    await outbox.stop(timeout_s=5)

    # At least one early retry during the storm (after the first, scheduled, attempt), at most one per poll interval.
    assert 1 <= lexical.attempts - 1 <= storm_s / poll_interval_s + 1
    assert store.outbox == {("p", "a"): 1}
    # One line for the backoff: the early retries that failed do not flood the log.
    assert len(caplog.records) == 1


async def until(condition: Callable[[], bool]) -> None:
    """Return once `condition` holds (checked every millisecond); fail after 5 s."""
    async with asyncio.timeout(5):
        while not condition():
            await asyncio.sleep(0.001)


async def test_stop_waits_for_the_in_flight_batch() -> None:
    store, lexical = OutboxStore(), FlakyLexical()
    store.write("p", "a", "text")
    lexical.release = asyncio.Event()
    outbox = worker(store, lexical)
    outbox.start()
    await lexical.started.wait()

    stopping = asyncio.create_task(outbox.stop())
    await until(lambda: not outbox.running)  # stop() took the loop's task, and the batch is still in flight
    assert not stopping.done()
    lexical.release.set()
    await asyncio.wait_for(stopping, timeout=5)

    assert store.outbox == {}
    assert not outbox.running


async def test_stop_after_timeout_cancels_and_keeps_the_entry() -> None:
    store, lexical = OutboxStore(), FlakyLexical()
    store.write("p", "a", "text")
    lexical.release = asyncio.Event()  # never released: the engine hangs
    outbox = worker(store, lexical)
    outbox.start()
    await lexical.started.wait()

    await outbox.stop(timeout_s=0.01)

    assert not outbox.running
    assert store.outbox == {("p", "a"): 1}


def test_backoff_doubles_up_to_the_cap() -> None:
    outbox = OutboxWorker(
        store=OutboxStore(), lexical=FlakyLexical(), batch_size=1, poll_interval_s=0.5, max_backoff_s=3.0
    )

    assert [outbox._backoff_s(n) for n in range(1, 6)] == [0.5, 1.0, 2.0, 3.0, 3.0]


class RefusingLexical(FlakyLexical):
    """A lexical index that refuses, as sent, every batch holding one of the `refused` documents."""

    def __init__(self, *refused: tuple[str, str]) -> None:
        super().__init__()
        self.refused = set(refused)
        self.batches: list[list[str]] = []

    async def replace_documents(self, documents: Sequence[DocumentChunks]) -> None:
        self.batches.append([document.document_id for document in documents])
        if any((document.project_id, document.document_id) in self.refused for document in documents):
            raise EngineRejectedError("an _id it cannot take", engine=self.name)
        await super().replace_documents(documents)


async def test_a_document_the_index_refuses_holds_up_neither_its_batch_nor_other_projects() -> None:
    store, lexical = OutboxStore(), RefusingLexical(("p", "bad"))
    store.write("p", "bad", "text bad")
    for project_id, name in (("p", "a"), ("p", "b"), ("q", "c")):
        store.write(project_id, name, f"text {name}")
    outbox = worker(store, lexical, batch_size=10)

    indexed = await outbox.run_once()

    assert indexed == 3
    assert set(lexical.indexed) == {("p", "a"), ("p", "b"), ("q", "c")}
    assert list(store.outbox) == [("p", "bad")]  # still queued: tried again when its lease runs out
    assert [(document.document_id, error.message) for document, error in outbox.refused] == [
        ("bad", "an _id it cannot take")
    ]
    # The whole batch, then each project: the refused one document by document.
    assert lexical.batches == [["bad", "a", "b", "c"], ["bad", "a", "b"], ["bad"], ["a"], ["b"], ["c"]]


async def test_drain_says_which_documents_the_index_refused_after_indexing_the_rest() -> None:
    store, lexical = OutboxStore(), RefusingLexical(("p", "bad"))
    for name in ("bad", "a", "b"):
        store.write("p", name, f"text {name}")

    with pytest.raises(
        EngineRejectedError, match=r"refused 1 documents, left queued \(the first, 'bad' of project 'p'"
    ):
        await worker(store, lexical, batch_size=10).drain(timeout_s=5)

    assert set(lexical.indexed) == {("p", "a"), ("p", "b")}
    assert list(store.outbox) == [("p", "bad")]
