"""Session-wide real engines: one embedded PostgreSQL + pgvector and one embedding model per test run."""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

import pytest

from app.engines.embedded_postgres import EmbeddedPostgres
from app.engines.embedder import load_embedder

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from app.engines.embedder import SentenceTransformerEmbedder

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(scope="session")
def postgres_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A SQLAlchemy asyncpg URL to a real PostgreSQL 18 + pgvector started for this test session."""
    server = EmbeddedPostgres(tmp_path_factory.mktemp("pgdata") / "pg")
    url = server.start()
    yield url
    server.stop()


@pytest.fixture(scope="session")
def embedder() -> SentenceTransformerEmbedder:
    """The real default model (all-MiniLM-L6-v2 from its pip package), loaded once."""
    return load_embedder("all-MiniLM-L6-v2", batch_size=32)


@pytest.fixture
def unique_name(request: pytest.FixtureRequest) -> str:
    """A name safe for tables, indexes and projects, unique per test (haystack's per-test table pattern)."""
    cleaned = re.sub(r"[^a-z0-9]+", "_", request.node.name.lower()).strip("_")
    return f"t_{cleaned[:40]}_{abs(hash(request.node.nodeid)) % 100000}"


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """A fresh POIMEN_DATA_DIR-like folder for one test."""
    path = tmp_path / "data"
    path.mkdir()
    return path
