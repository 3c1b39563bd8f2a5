"""The lexical outbox worker: copy what the document store queued into the lexical index.

PostgreSQL is the source of truth; the lexical index follows it. A document's outbox entry is
dropped only after the lexical index took its current chunk set, so an engine outage delays
indexing but never loses it. Replaying an entry is harmless: `replace_documents` is idempotent.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING

from app.domain.errors import EngineError, EngineRejectedError, EngineTimeoutError
from app.observability.metrics import record_engine_error

if TYPE_CHECKING:
    from collections.abc import Callable

    from app.config import Settings
    from app.domain.models import DocumentChunks
    from app.domain.ports import DocumentStore, LexicalIndex

logger = logging.getLogger("poimen.outbox")


class OutboxWorker:
    """Drains the store's outbox into a `LexicalIndex` in batches, in the background or on demand.

    One cycle: `claim_outbox(limit=batch_size)` -> `lexical.replace_documents` -> `complete_outbox`;
    a failed cycle releases its claim. Any number of workers, in any process, may drain one store:
    claims are leases, so no two workers hold one entry, and the lexical index refuses a write older
    than the version it holds.
    After a failed cycle the worker waits `poll_interval_s`, doubling per consecutive failure up to
    `max_backoff_s`, and retries the same entries; a `wake()` (a write) cuts that wait short once
    `poll_interval_s` has passed since the failure. Cycles never overlap, whoever runs them.
    `on_indexed(project_id)` runs once per project of each completed batch; `on_error` sees every
    failure of the background loop.
    """

    def __init__(  # noqa: PLR0913 - each collaborator and knob is named at the composition root
        self,
        *,
        store: DocumentStore,
        lexical: LexicalIndex,
        batch_size: int,
        poll_interval_s: float,
        max_backoff_s: float,
        on_indexed: Callable[[str], None] | None = None,
        on_error: Callable[[Exception], None] | None = None,
    ) -> None:
        if batch_size < 1:
            msg = f"batch_size must be at least 1, got {batch_size}"
            raise ValueError(msg)
        if poll_interval_s <= 0 or max_backoff_s <= 0:
            msg = "poll_interval_s and max_backoff_s must be positive"
            raise ValueError(msg)
        self._store, self._lexical = store, lexical
        self._drained_through: int | None = None  # the newest change the last drain waited for
        self._batch_size = batch_size
        self._poll_interval_s, self._max_backoff_s = poll_interval_s, max_backoff_s
        self._on_indexed, self._on_error = on_indexed, on_error
        self._cycle_lock = asyncio.Lock()
        self._wake_event = asyncio.Event()
        self._stop_event = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.consecutive_failures = 0
        """Scheduled retries failed since the last success (early ones a write asked for not counted); 0 while
        the lexical index keeps up."""
        self.refused: list[tuple[DocumentChunks, EngineRejectedError]] = []
        """The documents the last cycle's batch held that the lexical index refused as sent, with why."""

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        *,
        store: DocumentStore,
        lexical: LexicalIndex,
        on_indexed: Callable[[str], None] | None = None,
    ) -> OutboxWorker:
        """A worker with `OUTBOX_BATCH_SIZE`, `OUTBOX_POLL_INTERVAL_S`, `OUTBOX_MAX_BACKOFF_S`; counts engine errors."""
        return cls(
            store=store,
            lexical=lexical,
            batch_size=settings.outbox_batch_size,
            poll_interval_s=settings.outbox_poll_interval_s,
            max_backoff_s=settings.outbox_max_backoff_s,
            on_indexed=on_indexed,
            on_error=_count_engine_error,
        )

    @property
    def running(self) -> bool:
        """True while the background loop started by `start()` is alive."""
        return self._task is not None and not self._task.done()

    async def run_once(self) -> int:
        """Run one cycle; return how many documents it indexed (0: the outbox was empty).

        Raises:
            EngineError: the store or the lexical index failed; the entries stay queued.
        """
        async with self._cycle_lock:
            claimed = await self._store.claim_outbox(limit=self._batch_size)
            if not claimed:
                return 0
            try:
                indexed = await self._index(claimed)
                await self._store.complete_outbox(indexed)
            except EngineError:
                # Give the entries back at once rather than when the lease ends: another worker (or
                # this one, after its backoff) may take them. Best effort: the lease covers a failure.
                with contextlib.suppress(EngineError):
                    await self._store.release_outbox(claimed)
                raise
        if self._on_indexed is not None:
            for project_id in sorted({document.project_id for document in indexed}):
                self._on_indexed(project_id)
        return len(indexed)

    async def _index(self, claimed: list[DocumentChunks]) -> list[DocumentChunks]:
        """Index `claimed`; when the engine refuses the batch, every document it takes, each project apart.

        A document the engine refuses as sent (`EngineRejectedError`) failed the whole batch, on every
        retry, and with it every project queued behind it (one project's id squatting another's index
        name, an id the engine cannot take). The refused ones keep their lease, so they are tried again
        when it runs out (`OUTBOX_LEASE_S`), neither holding the rest up nor retried in a tight loop; they
        are `refused` until the next cycle. Any other failure is the caller's: the batch goes back whole.
        """
        self.refused = []
        refusal = await self._refusal(claimed)
        if refusal is None:
            return claimed
        by_project: dict[str, list[DocumentChunks]] = {}
        for document in claimed:
            by_project.setdefault(document.project_id, []).append(document)
        indexed: list[DocumentChunks] = []
        for group in by_project.values():
            if len(by_project) > 1:  # with one project, the batch was this group
                refusal = await self._refusal(group)
                if refusal is None:
                    indexed.extend(group)
                    continue
            for document in group:
                alone = refusal if len(group) == 1 else await self._refusal([document])
                if alone is None:
                    indexed.append(document)
                else:
                    self.refused.append((document, alone))
        if not self.refused:
            return indexed
        first, reason = self.refused[0]
        logger.warning(
            "lexical indexing refused %d of %d documents (tried again when their lease runs out); the first, "
            "%r of project %r: %s",
            len(self.refused),
            len(claimed),
            first.document_id,
            first.project_id,
            reason.message,
        )
        return indexed

    async def _refusal(self, documents: list[DocumentChunks]) -> EngineRejectedError | None:
        """None when the lexical index took `documents`; its refusal when it refused them as sent."""
        try:
            await self._lexical.replace_documents(documents)
        except EngineRejectedError as refusal:
            return refusal
        return None

    async def drain(self, timeout_s: float) -> int:
        """Run cycles until what was queued when it began is indexed; return how many documents were indexed.

        Changes queued after it began are indexed as the cycles reach them, but not waited for: beside a
        writer that kept the outbox from emptying (another client, a second import), a drain that ran until
        the outbox was empty made progress every cycle, so its timeout never came, and it never ended.

        `timeout_s` bounds the time without progress, not the whole drain: a cycle that indexes something
        starts it again, so a large backlog (an import of 25,000 chunks takes about a minute on two cores)
        drains to the end, and a lexical engine that stays down (failures retried with backoff) ends it.

        Raises:
            EngineTimeoutError: nothing was indexed for `timeout_s` and the outbox is not empty (names the
                lexical engine).
            EngineRejectedError: the lexical index refused some documents as sent (`refused`); the rest
                were indexed, and those stay queued.
        """
        deadline = time.monotonic() + timeout_s
        indexed, failures = 0, 0
        last_error: EngineError | None = None
        refused: dict[tuple[str, str], EngineRejectedError] = {}
        through: int | None = None  # the newest change queued when the drain began, read at its first cycle
        while True:
            try:
                if through is None:
                    through = self._drained_through = (await self._store.outbox_stats()).newest_version
                count = await self.run_once()
            except EngineError as error:
                failures, last_error = failures + 1, error
                delay = self._backoff_s(failures)
                if time.monotonic() + delay > deadline:
                    break
                await asyncio.sleep(delay)
                continue
            refused.update(((document.project_id, document.document_id), why) for document, why in self.refused)
            if count == 0 and refused:
                (project_id, document_id), first = next(iter(refused.items()))
                msg = (
                    f"the lexical index refused {len(refused)} documents, left queued (the first, {document_id!r} "
                    f"of project {project_id!r}: {first.message}); {indexed} indexed"
                )
                raise EngineRejectedError(msg, engine=self._lexical.name)
            if count == 0:
                return indexed
            indexed += count
            failures = 0
            deadline = time.monotonic() + timeout_s
            try:
                if (await self._store.outbox_stats(through=through)).backlog == 0:
                    return indexed
            except EngineError as error:  # asked again after the next cycle, which retries the store
                last_error = error
        reason = f": {last_error.message}" if last_error is not None else ""
        msg = f"lexical outbox: nothing indexed for {timeout_s:g} s, after indexing {indexed} documents{reason}"
        raise EngineTimeoutError(msg, engine=self._lexical.name)

    async def backlog(self) -> int:
        """Documents still queued, whoever holds them (another process's lease, a refusal's).

        After a `drain`, those it waited for: queued before it began.
        """
        return (await self._store.outbox_stats(through=self._drained_through)).backlog

    async def run(self) -> None:
        """Loop until `stop()`: drain in cycles, wait `poll_interval_s` (or a `wake()`) when idle.

        Each idle turn hands the lexical index an empty batch first (see `LexicalIndex.replace_documents`).

        Every exception of a cycle is passed to `on_error` and retried with backoff, so one bad
        batch or an unexpected bug never ends the loop while the service runs. A write during the
        backoff retries early (`_back_off`): an engine that came back gets new writes at once, not
        after up to `max_backoff_s`, and one that stays down sees at most one cycle per `poll_interval_s`.
        """
        loop = asyncio.get_running_loop()
        retry_at = 0.0  # when the backoff's scheduled retry is due (loop time); 0.0 while cycles succeed
        while not self._stop_event.is_set():
            early = loop.time() < retry_at
            try:
                count = await self.run_once()
                if count == 0:
                    # Idle: an empty batch lets the index check itself (an OpenSearch index lost while
                    # nothing was written is recreated and refilled now, not at the next write).
                    await self._lexical.replace_documents([])
            except Exception as error:  # noqa: BLE001 - the loop must outlive any failure; on_error reports it
                if self._on_error is not None:
                    self._on_error(error)
                if early:  # the backoff (and its log line) stands: the engine is still not back
                    logger.debug("early lexical outbox retry failed: %s: %s", type(error).__name__, error)
                else:
                    self.consecutive_failures += 1
                    delay_s = self._backoff_s(self.consecutive_failures)
                    retry_at = loop.time() + delay_s
                    # At most one line per backoff: writes wait in the outbox, and nothing else says why.
                    logger.warning(
                        "lexical outbox cycle failed (%d in a row), retrying in %.1f s (a write retries after "
                        "%g s): %s: %s",
                        self.consecutive_failures,
                        delay_s,
                        min(self._poll_interval_s, self._max_backoff_s),
                        type(error).__name__,
                        error,
                    )
                await self._back_off(retry_at)
                continue
            self.consecutive_failures, retry_at = 0, 0.0
            if count < self._batch_size:
                await self._pause(self._poll_interval_s, wakeable=True)

    def wake(self) -> None:
        """Skip the current idle wait, or cut a failure backoff short; call after a write queued work."""
        self._wake_event.set()

    def start(self) -> None:
        """Start `run()` as a task on the running loop; does nothing when already running."""
        if self.running:
            return
        self._stop_event.clear()
        self._task = asyncio.create_task(self.run(), name="poimen-lexical-outbox")

    async def stop(self, timeout_s: float | None = None) -> None:
        """Stop the loop after its in-flight cycle; cancel it only if that takes over `timeout_s`."""
        task, self._task = self._task, None
        if task is None:
            return
        self._stop_event.set()
        self._wake_event.set()
        try:
            await asyncio.wait_for(asyncio.shield(task), timeout=timeout_s)
        except TimeoutError:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _backoff_s(self, failures: int) -> float:
        return float(min(self._max_backoff_s, self._poll_interval_s * 2 ** min(failures - 1, 32)))

    async def _back_off(self, retry_at: float) -> None:
        """Wait until the scheduled retry at `retry_at` (loop time), or a `wake()` after `poll_interval_s`.

        The first `poll_interval_s` no wake ends (a wake then is kept for after it): however many writes
        arrive while the engine stays down, it sees at most one cycle per `poll_interval_s` plus the
        cycle's own time, the rate the idle loop polls it at anyway, and logs one line per backoff.
        """
        await self._pause(min(self._poll_interval_s, self._max_backoff_s), wakeable=False)
        await self._pause(retry_at - asyncio.get_running_loop().time(), wakeable=True)

    async def _pause(self, delay_s: float, *, wakeable: bool) -> None:
        """Sleep up to `delay_s`; `stop()` always ends it early, `wake()` only when `wakeable`."""
        waits = [asyncio.ensure_future(self._stop_event.wait())]
        if wakeable:
            waits.append(asyncio.ensure_future(self._wake_event.wait()))
        try:
            await asyncio.wait(waits, timeout=max(0.0, delay_s), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waits:
                waiter.cancel()
        if wakeable:
            self._wake_event.clear()


def _count_engine_error(error: Exception) -> None:
    if isinstance(error, EngineError):
        record_engine_error(error.engine)
