"""What the CLI's `ingest` and `reindex` commands do, on the same engines as the server."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from tqdm import tqdm

from app.domain.errors import EngineError, SearchServiceError
from app.ingestion.outbox import OutboxWorker
from app.ingestion.pipeline import MAX_CHUNKS_PER_REQUEST
from app.ingestion.reindex import rebuild_project
from app.ingestion.sources import read_documents
from app.ingestion.validation import validate_documents
from app.wiring.engines import open_engines
from app.wiring.services import build_pipeline

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence
    from pathlib import Path

    from app.config import Settings
    from app.domain.models import Document

OUTBOX_DRAIN_TIMEOUT_S = 30.0
"""How long a command waits for the lexical index to take anything before it leaves the rest to a server.

Not a bound on the whole wait: the command drains while batches go in, so it returns with everything it
wrote searchable on both legs (it bounded the whole wait, and an import of 25,000 chunks exited 0 with
6,318 of its 18,118 documents missing from lexical search)."""


async def drain_or_explain(worker: OutboxWorker) -> None:
    """Index what this command queued lexically, to the end while it makes progress; say so, or why it is deferred."""
    try:
        indexed = await worker.drain(OUTBOX_DRAIN_TIMEOUT_S)
    except EngineError as error:
        print(
            f"lexical indexing deferred ({error.message}); a running server indexes the queued documents",
            file=sys.stderr,
        )
        return
    # The outbox is every project's: what it indexed may include other projects' queued documents.
    try:
        waiting = await worker.backlog()
    except EngineError:
        waiting = 0  # the store stopped answering just now: what was indexed stands
    if waiting:
        # Leased by another process (a server's worker, or one that died: back when its lease ends).
        print(
            f"{indexed} queued documents indexed, of any project; {waiting} more are being indexed by another "
            "process (a running server), or will be when its lease ends (OUTBOX_LEASE_S)",
            file=sys.stderr,
        )
        return
    print(f"lexical index up to date ({indexed} queued documents indexed, of any project)", file=sys.stderr)


async def ingest(settings: Settings, *, path: Path, project: str, batch_size: int) -> int:
    """Ingest a folder or a BEIR corpus into `project`, with a progress bar; 0 on success.

    Each file left out (empty, binary, a symlink below a folder) is named on stderr with its reason, and
    so is each note read with replaced bytes (not valid UTF-8). A path with no document to ingest is 1,
    before any engine starts, as `reindex` and `export` of a project without documents are.
    """
    skipped: list[str] = []

    def report_skip(skipped_path: Path, reason: str) -> None:
        skipped.append(str(skipped_path))
        print(f"skipped {skipped_path}: {reason}", file=sys.stderr)

    def report_warning(read_path: Path, message: str) -> None:
        print(f"warning: {read_path}: {message}", file=sys.stderr)

    try:
        documents = list(read_documents(path, project_id=project, on_skip=report_skip, on_warning=report_warning))
        # Every document checked before any is written (one bad id, a duplicate): the outcome does not
        # depend on --batch-size, and a refused folder leaves the project as it was.
        validate_documents(documents, max_document_bytes=settings.max_document_bytes)
    except (OSError, ValueError, SearchServiceError) as error:
        detail = error.message if isinstance(error, SearchServiceError) else str(error)
        print(f"cannot ingest {path}: {detail}; nothing written", file=sys.stderr)
        return 1
    if not documents:
        # An empty folder (a volume not mounted, a mistyped path into an empty one), an empty corpus, or
        # every file skipped: "0 created" with exit 0 read as a successful ingest to a script.
        left_out = f" ({len(skipped)} skipped)" if skipped else ""
        print(f"cannot ingest {path}: no documents to ingest there{left_out}; nothing written", file=sys.stderr)
        return 1
    status = 0
    async with open_engines(settings) as engines:
        pipeline = build_pipeline(settings, engines)
        counts = {"created": 0, "updated": 0, "unchanged": 0}
        chunks = 0
        # disable=None: a bar on a terminal only; on a pipe or a CI log each redraw was one more "\r" line.
        with tqdm(total=len(documents), unit="doc", desc=f"ingest {project}", disable=None) as progress:
            for batch in batches(documents, batch_size=batch_size, chunk_count=lambda d: len(pipeline.chunk(d))):
                try:
                    outcomes = await pipeline.ingest(batch)
                except SearchServiceError as error:
                    progress.close()  # the message on a line of its own, not after the bar
                    written = sum(counts.values())
                    print(
                        f"ingest stopped after {written} of {len(documents)} documents: {error.message}",
                        file=sys.stderr,
                    )
                    status = 1
                    break
                for outcome in outcomes:
                    counts[outcome.status] += 1
                    chunks += outcome.chunk_count
                progress.update(len(batch))
        print(
            f"{counts['created']} created, {counts['updated']} updated, {counts['unchanged']} unchanged;"
            f" {chunks} chunks" + (f"; {len(skipped)} skipped" if skipped else ""),
            file=sys.stderr,
        )
        # Also after a failure: what was written is searched lexically now, not after some later command.
        await drain_or_explain(OutboxWorker.from_settings(settings, store=engines.store, lexical=engines.lexical))
    return status


async def reindex(settings: Settings, *, project: str) -> int:
    """Rebuild a project's lexical index from PostgreSQL, the source of truth; 0 on success.

    A project without documents (a misspelt name) is 1, as `export` of one is: a script must not take
    "0 documents queued" for a project rebuilt.
    """
    # The lexical index is rebuilt from stored text: nothing is embedded, so the model is not loaded.
    async with open_engines(settings, load_model_at_start=False) as engines:
        queued = await rebuild_project(engines.store, project)
        if not queued:
            print(f"project {project!r} holds no documents; nothing to reindex", file=sys.stderr)
            return 1
        print(f"{queued} documents queued for lexical indexing", file=sys.stderr)
        await drain_or_explain(OutboxWorker.from_settings(settings, store=engines.store, lexical=engines.lexical))
    return 0


def batches(
    documents: Sequence[Document], *, batch_size: int, chunk_count: Callable[[Document], int]
) -> Iterator[list[Document]]:
    """`documents` in order, `batch_size` at most at a time and no more chunks than one write takes.

    The pipeline refuses a write of more than `MAX_CHUNKS_PER_REQUEST` chunks (the memory a process holds
    for them), so 64 long notes could not go in one batch; a batch closes early instead. A document alone
    always makes a batch (one document is held to fewer chunks than that).
    """
    batch: list[Document] = []
    chunks = 0
    for document in documents:
        count = chunk_count(document)
        if batch and (len(batch) == batch_size or chunks + count > MAX_CHUNKS_PER_REQUEST):
            yield batch
            batch, chunks = [], 0
        batch.append(document)
        chunks += count
    if batch:
        yield batch
