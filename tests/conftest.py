"""Session-wide real engines: one embedded PostgreSQL + pgvector and one embedding model per test run."""

from __future__ import annotations

import fcntl
import logging
import os
import re
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from app.engines.embedded_postgres import EmbeddedPostgres
from app.engines.embedder import EmbedderOptions, load_embedder
from app.observability.logs import AUTH_LOGGER, SERVER_LOGGER, ThrottledMessage

if TYPE_CHECKING:
    from collections.abc import Iterator

    from app.engines.embedder import ServingEmbedder

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# One ONNX export of the model (named by a hash of its weights) for this session and the servers it starts,
# instead of one per data folder: exporting takes longer than a test.
ONNX_DIR = Path(os.environ.setdefault("EMBEDDING_ONNX_DIR", str(Path(tempfile.gettempdir()) / "poimen-test-onnx")))


@pytest.fixture(scope="session")
def postgres_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A SQLAlchemy asyncpg URL to a real PostgreSQL 18 + pgvector started for this test session."""
    server = EmbeddedPostgres(tmp_path_factory.mktemp("pgdata") / "pg")
    url = server.start()
    yield url
    server.stop()


@pytest.fixture(scope="session")
def embedder() -> Iterator[ServingEmbedder]:
    """The real default model (all-MiniLM-L6-v2 from its pip package) on the default backend, loaded once."""
    options = EmbedderOptions(backend="onnx", onnx_dir=ONNX_DIR, batch_size=32)
    ONNX_DIR.mkdir(parents=True, exist_ok=True)
    # Parallel workers (pytest -n) take turns: the first exports, the others find its file instead of each
    # spending a core on the same export (the export's rename keeps a concurrent one correct, only wasteful).
    with (ONNX_DIR / ".export.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        embedder = load_embedder("all-MiniLM-L6-v2", options=options)
    assert embedder.backend == "onnx", "the ONNX export failed (see the log): tests would run the fallback"
    yield embedder
    embedder.close()


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


@pytest.fixture(autouse=True)
def _root_logger_left_alone() -> Iterator[None]:
    """A test must not leave a third party's handler on the root logger (Litestar's default `logging_config` adds a
    queue listener writing to the stream pytest captured): at exit the embedded PostgreSQL's clean-up logs through it
    into a closed file, and every parallel run ended with "--- Logging error ---" tracebacks."""
    yield
    foreign = [
        handler
        for handler in logging.getLogger().handlers
        if not type(handler).__module__.startswith(("app.", "_pytest."))
    ]
    for handler in foreign:  # only the test that left it fails
        logging.getLogger().removeHandler(handler)
    assert not foreign, f"the test left {foreign} on the root logger (pass logging_config=None to Litestar)"


@pytest.fixture(autouse=True)
def _fresh_log_throttles() -> None:
    """Each test starts with empty log throttles: a refusal another test logged must not hold back this one's."""
    for name in (SERVER_LOGGER, AUTH_LOGGER):
        for installed in logging.getLogger(name).filters:
            if isinstance(installed, ThrottledMessage):
                installed.reset()
