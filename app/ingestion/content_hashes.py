"""What a chunk embeds, and the hashes ingestion's idempotency rests on.

Contracts:
- `embedding_text` is the exact string embedded for a chunk; `chunk_hash` is its SHA-256, the key an
  embedding is cached under (per model and project).
- `content_hash` covers everything that decides a document's stored chunks and embeddings: a document whose
  stored hash equals it is neither written nor embedded again. Changing what it covers rewrites every
  document at its next ingest.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING

from app.domain.models import titled_text
from app.ingestion.chunking import CHUNKER_VERSION

if TYPE_CHECKING:
    from app.domain.models import Chunk, ChunkDraft, Document
    from app.ingestion.chunking import ChunkingPolicy


def embedding_text(chunk: Chunk | ChunkDraft) -> str:
    """The exact string embedded for a chunk: its `titled_text` (breadcrumb, newline, text).

    The breadcrumb puts the title and section path into the vector (as BEIR embeds title + text);
    `Chunk.text` itself stays the raw section text. A chunk with a `context` gets a newline and the
    context appended last, so a model that truncates cuts the context, never the chunk's own words.
    `chunk_hash` is the SHA-256 of this string.
    """
    text = titled_text(chunk.breadcrumb, chunk.text)
    context = getattr(chunk, "context", "")
    return f"{text}\n{context}" if context else text


def chunk_hash(text: str) -> str:
    """SHA-256 hex digest of the UTF-8 text that gets embedded."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def content_hash(document: Document, *, policy: ChunkingPolicy, embedding_model: str) -> str:
    """SHA-256 over everything that decides a document's stored chunks and their embeddings.

    Covers title, text, source, tags, event time, metadata, context (when set), the chunking policy,
    the chunker version and the embedding model; project and document id are the key the hash is
    stored under.
    """
    payload = {
        "title": document.title,
        "text": document.text,
        "source": document.source,
        "tags": list(document.tags),
        "event_time": document.event_time.isoformat() if document.event_time is not None else None,
        "metadata": document.metadata,
        "policy": [policy.max_chars, policy.overlap_chars, policy.min_chars, CHUNKER_VERSION],
        "embedding_model": embedding_model,
    }
    if document.context:  # only when set, so documents without context keep their stored hashes
        payload["context"] = document.context
    encoded = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(encoded.encode("utf-8")).hexdigest()
