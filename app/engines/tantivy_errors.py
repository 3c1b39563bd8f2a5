"""How the embedded lexical index reports tantivy's failures: `EngineUnavailableError`, never a Rust panic."""

from __future__ import annotations

from typing import NoReturn

from app.domain.errors import EngineUnavailableError
from app.engines.tantivy_projects import ENGINE_NAME


def raise_unavailable(message: str, error: BaseException) -> NoReturn:
    """Raise `EngineUnavailableError` saying `message` and the error, chained to it."""
    detail = f"{message}: {error}"
    raise EngineUnavailableError(detail, engine=ENGINE_NAME) from error


def reraise_unless_panic(error: BaseException) -> None:
    """Let everything but a tantivy Rust panic propagate (pyo3's PanicException is a BaseException)."""
    if type(error).__name__ != "PanicException":
        raise error
