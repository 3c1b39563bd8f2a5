"""Where the engines are and how they are reached: PostgreSQL, the embedding model, OpenSearch.

`EngineSettings` is a base of `app.config.Settings`, never built alone: each field is read from its flat env
name (`DATABASE_URL`, `OPENSEARCH_INDEX`, ...) and is validated by `Settings` (URLs, the index name, the
combinations of auth). An empty variable is not set (`Settings`' sources leave it out, as for every setting):
empty `DATABASE_URL` / `OPENSEARCH_URL` select the embedded defaults.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final, Literal

from pydantic import BaseModel, Field, SecretStr

OPENSEARCH_INDEX_MAX_CHARS: Final = 116
"""255 bytes (OpenSearch's name limit) less `-p-`, an escaped project id (at most 128) and `-v<schema>`."""
OPENSEARCH_INDEX_PATTERN: Final = rf"^[a-z0-9][a-z0-9._+-]{{0,{OPENSEARCH_INDEX_MAX_CHARS - 1}}}$"
"""A lowercase index name not starting with `-`, `_` or `+`, short enough for every project's index name."""


class EngineSettings(BaseModel):
    """The engines' connection, model and pool settings (a base of `Settings`, which reads them from env)."""

    # Engines: empty DATABASE_URL / OPENSEARCH_URL select the embedded defaults.
    database_url: str | None = None
    opensearch_url: str | None = None
    poimen_data_dir: Path = Path(".poimen")
    embedding_model: str = "all-MiniLM-L6-v2"
    # The vector column's size: `poimen migrate` reads it here, never from the model (no torch in the
    # migration Job); `poimen serve` checks the model against it at start.
    embedding_dimensions: int = Field(default=384, ge=1, le=16000)
    # `onnx`: ONNX Runtime over the bundled weights, exported once into POIMEN_DATA_DIR/models (torch,
    # with the reason logged, when that fails); `torch`: the sentence-transformers model itself.
    embedding_backend: Literal["onnx", "torch"] = "onnx"
    # Where the export is kept instead (an image folder baked at build, or one shared by test servers).
    embedding_onnx_dir: Path | None = None
    # Passages per forward pass while ingesting. 16 long chunks peak near 0.5 GiB of activations; 64 near 1.7 GiB
    # (over the chart's 2 GiB limit with the rest) and were no faster (docs/operations.md).
    embedding_batch_size: int = Field(default=16, ge=1, le=1024)
    embedding_threads: int = Field(default=0, ge=0, le=256)  # ingest encoder threads; 0: one per core
    embedding_query_threads: int = Field(default=1, ge=1, le=256)  # threads of the query encoder (onnx)
    # Queries arriving together share one forward pass: at most this many texts, gathered for at most
    # EMBEDDING_BATCH_WAIT_MS after the first (0: only what queued while the previous pass ran).
    embedding_query_max_batch: int = Field(default=32, ge=1, le=1024)
    embedding_batch_wait_ms: float = Field(default=0.0, ge=0.0, le=100.0)
    embedding_query_cache_size: int = Field(default=4096, ge=0, le=1_000_000)  # query vectors kept (LRU)
    # Per embedding batch of an ingest: a hung model fails the request (504, nothing written), never holds it.
    ingest_embed_timeout_s: float = Field(default=60.0, gt=0, le=3600)
    # Read by `poimen migrate` only (connected as the tables' owner): grant this existing role what the service
    # needs. The service then connects as it (docs/security.md "External PostgreSQL"); needs DATABASE_URL.
    database_runtime_role: str | None = Field(default=None, pattern=r"^[a-z_][a-z0-9_]{0,62}$")
    # How long a migration waits for a table's lock before it gives up, rolls back and tries again (up to
    # MIGRATION_LOCK_ATTEMPTS tries): serving queries of that table queue behind the waiting ALTER meanwhile, so
    # an unbounded wait behind one long transaction stopped all traffic (docs/operations.md).
    migration_lock_timeout_s: float = Field(default=5.0, gt=0, le=600)
    migration_lock_attempts: int = Field(default=5, ge=1, le=100)
    # No overflow beyond it: under load, overflow connections were opened and closed again and again.
    # At least 2: a write holds one connection for its documents' locks and takes a second for the write.
    database_pool_size: int = Field(default=16, ge=2, le=200)
    hnsw_ef_search: int = Field(default=100, ge=1, le=1000)

    # OpenSearch (production lexical leg).
    # The base of every project's index name (`<OPENSEARCH_INDEX>-p-<project>`): lowercase, short enough for all.
    opensearch_index: str = Field(default="poimen-chunks", pattern=OPENSEARCH_INDEX_PATTERN)
    opensearch_auth: Literal["none", "basic", "forward_jwt"] = "none"
    opensearch_username: str | None = None
    opensearch_password: SecretStr | None = None
    # With OPENSEARCH_AUTH=forward_jwt: the service's own bearer token for its own work (index creation,
    # readiness, the outbox), as an alternative to OPENSEARCH_USERNAME/OPENSEARCH_PASSWORD.
    opensearch_service_token: SecretStr | None = None
    opensearch_ca_file: Path | None = None
    opensearch_verify_certs: bool = True
    opensearch_timeout_s: float = Field(default=5.0, gt=0)
    opensearch_max_retries: int = Field(default=2, ge=0, le=10)
    # Only 1 is accepted: each project's index has one primary shard, so its BM25 statistics are its own.
    opensearch_shards: int = Field(default=1, ge=1)
    opensearch_replicas: int = Field(default=1, ge=0)
