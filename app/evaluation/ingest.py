"""Ingests an evaluation data set through the real pipeline once, and remembers that it did.

A marker file holds everything that decides the ingested corpus; a run with the same signature skips
ingesting. The adapters are handed in (`EvaluationEngines`): this layer never opens drivers.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import islice
from typing import TYPE_CHECKING, Final

from tqdm import tqdm

from app.domain.catalog import DocumentSelection
from app.evaluation.datasets import TurnShape, read_corpus
from app.ingestion.chunking import CHUNKER_VERSION, ChunkingPolicy
from app.ingestion.outbox import OutboxWorker
from app.ingestion.pipeline import IngestionPipeline
from app.ingestion.reindex import rebuild_project

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence
    from pathlib import Path

    from app.config import Settings
    from app.domain.models import Document
    from app.domain.ports import DocumentStore, Embedder, LexicalIndex, VectorIndex
    from app.evaluation.datasets import EvalDataset
    from app.retrieval.rerank import SecondStage

INGEST_BATCH_DOCUMENTS: Final = 128
LISTING_PAGE: Final = 1000
OUTBOX_DRAIN_TIMEOUT_S: Final = 600.0
INGEST_MARKER_VERSION: Final = 6
"""Bumped when the way the harness turns a corpus into documents changes, so markers stop matching.

2: chunks store their context and the lexical index has a context field (an older tantivy folder is
recreated empty at open, so the corpus must be indexed again). 3: the lexical index files each chunk's
breadcrumb and text in one field and only its own context (tantivy schema version 2). 4: tantivy schema
version 4 (tag keys): an older folder is recreated empty at open. 5: tantivy schema version 5 (terms
folded to ASCII), likewise. 6: tantivy schema version 6 (Han and Hiragana characters are words), likewise.
"""


@dataclass(frozen=True, slots=True)
class EvaluationEngines:
    """The adapters an evaluation runs on; opened and closed by the caller (the api layer)."""

    embedder: Embedder
    vector: VectorIndex
    lexical: LexicalIndex
    store: DocumentStore
    second_stage: SecondStage | None = None  # the reranker `RERANKER` names, applied as the service applies it


@dataclass(frozen=True, slots=True)
class IngestSummary:
    """What `ensure_ingested` did: whether the marker allowed skipping, and document counts."""

    skipped: bool
    documents: int
    created: int
    updated: int
    unchanged: int
    chunks: int
    elapsed_s: float
    clocks: Mapping[str, datetime]
    removed: int = 0
    """Documents deleted because the corpus no longer holds them (`_remove_stale`)."""


def ingest_signature(
    dataset: EvalDataset, settings: Settings, embedder: Embedder, shape: TurnShape | None = None
) -> dict[str, object]:
    """Everything that decides the ingested corpus: if the marker holds the same, ingesting is skipped."""
    return {
        "turn_shape": (shape or TurnShape()).describe() if dataset.conversational else None,
        "marker_version": INGEST_MARKER_VERSION,
        "dataset": dataset.name,
        "corpus": dataset.corpus_fingerprint,
        "conversational": dataset.conversational,
        "embedding_model": embedder.model_name,
        "chunking": [settings.chunk_max_chars, settings.chunk_overlap_chars, settings.chunk_min_chars, CHUNKER_VERSION],
    }


async def ensure_ingested(
    dataset: EvalDataset,
    engines: EvaluationEngines,
    settings: Settings,
    *,
    marker_dir: Path,
    shape: TurnShape | None = None,
) -> IngestSummary:
    """Ingest the corpus through `IngestionPipeline` and index it lexically, unless the marker says it is done.

    The marker (`marker_dir/<dataset>.json`) is written only after the lexical index caught up, so an
    interrupted ingest is resumed (unchanged documents are skipped by their content hash), and the
    lexical index of the data set's projects is rebuilt from the store, so it is complete either way.
    """
    started = time.perf_counter()
    signature = ingest_signature(dataset, settings, engines.embedder, shape)
    marker = marker_dir / f"{dataset.name}.json"
    recorded = json.loads(marker.read_text(encoding="utf-8")) if marker.is_file() else {}
    if recorded.get("signature") == signature:
        clocks = {project: datetime.fromisoformat(moment) for project, moment in recorded.get("clocks", {}).items()}
        return IngestSummary(
            skipped=True,
            documents=0,
            created=0,
            updated=0,
            unchanged=0,
            chunks=0,
            elapsed_s=time.perf_counter() - started,
            clocks=clocks,
        )
    pipeline = IngestionPipeline(
        store=engines.store,
        embedder=engines.embedder,
        policy=ChunkingPolicy.from_settings(settings),
        embed_timeout_s=settings.ingest_embed_timeout_s,
    )
    documents = list(read_corpus(dataset, shape))
    counts: dict[str, int] = defaultdict(int)
    chunks = 0
    remaining = iter(documents)
    # disable=None: a bar on a terminal only; on a pipe or a CI log each redraw was one more "\r" line.
    with tqdm(total=len(documents), unit="doc", desc=f"ingest {dataset.name}", disable=None) as progress:
        while batch := list(islice(remaining, INGEST_BATCH_DOCUMENTS)):
            for outcome in await pipeline.ingest(batch):
                counts[outcome.status] += 1
                chunks += outcome.chunk_count
            progress.update(len(batch))
    removed = await _remove_stale(engines.store, documents)
    # Documents an earlier, interrupted run stored were skipped above as unchanged; their lexical
    # entries may be missing (or the index rebuilt empty), so every project is re-indexed from the store.
    for project_id in sorted({document.project_id for document in documents}):
        await rebuild_project(engines.store, project_id)
    worker = OutboxWorker.from_settings(settings, store=engines.store, lexical=engines.lexical)
    await worker.drain(OUTBOX_DRAIN_TIMEOUT_S)
    clocks = conversation_clock(documents)
    recorded = {"signature": signature, "clocks": {project: moment.isoformat() for project, moment in clocks.items()}}
    _write_marker(marker, recorded)
    return IngestSummary(
        skipped=False,
        documents=len(documents),
        created=counts["created"],
        updated=counts["updated"],
        unchanged=counts["unchanged"],
        removed=removed,
        chunks=chunks,
        elapsed_s=time.perf_counter() - started,
        clocks=clocks,
    )


async def _remove_stale(store: DocumentStore, documents: Sequence[Document]) -> int:
    """Delete what the data set's projects hold that the corpus no longer does; how many.

    Ingesting only writes: a document dropped from an edited corpus stayed in its project and was still
    retrieved (and scored as a miss) by every later run.
    """
    wanted: dict[str, set[str]] = defaultdict(set)
    for document in documents:
        wanted[document.project_id].add(document.document_id)
    removed = 0
    for project_id, kept in sorted(wanted.items()):
        stale: list[str] = []
        after: str | None = None
        while page := await store.list_documents(DocumentSelection(project_id), after=after, limit=LISTING_PAGE):
            stale += [item.document_id for item in page if item.document_id not in kept]
            after = page[-1].document_id
        for document_id in stale:
            removed += await store.delete_document(project_id, document_id)
    return removed


def conversation_clock(documents: Iterable[Document]) -> dict[str, datetime]:
    """Per project, "now" for relative dates in queries: the day after its latest event time."""
    latest: dict[str, datetime] = {}
    for document in documents:
        if document.event_time is not None:
            current = latest.get(document.project_id)
            latest[document.project_id] = max(current, document.event_time) if current else document.event_time
    return {project: moment + timedelta(days=1) for project, moment in latest.items()}


def _write_marker(marker: Path, recorded: Mapping[str, object]) -> None:
    """Written once per ingest, after minutes of work: a blocking write is not worth a thread here."""
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(json.dumps(recorded, indent=2) + "\n", encoding="utf-8")
