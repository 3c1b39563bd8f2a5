"""Builds the query optimizer with the deployment's vocabulary (`QUERY_VOCABULARY_PATH`), read once per process."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from app.config import ConfigurationError
from app.query.deployment_vocabulary import (
    DeploymentVocabulary,
    VocabularyFileError,
    abbreviation_table,
    parse_deployment_vocabulary,
)
from app.query.optimizer import QueryOptimizer

if TYPE_CHECKING:
    from pathlib import Path

    from app.config import Settings


@lru_cache(maxsize=4)
def read_query_vocabulary(path: Path) -> DeploymentVocabulary:
    """The vocabulary in `path`, read and checked once per process; `ConfigurationError` naming the file and entry."""
    where = f"QUERY_VOCABULARY_PATH {path}"
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        msg = f"{where}: not UTF-8 text"
        raise ConfigurationError(msg) from None
    except OSError as error:
        msg = f"{where}: cannot read ({error.strerror or type(error).__name__})"
        raise ConfigurationError(msg) from None
    try:
        return parse_deployment_vocabulary(text)
    except VocabularyFileError as error:
        msg = f"{where}: {error}"
        raise ConfigurationError(msg) from None


def build_query_optimizer(settings: Settings) -> QueryOptimizer:
    """The optimizer with the bundled abbreviations, or with the deployment's vocabulary when one is set."""
    if settings.query_vocabulary_path is None:
        return QueryOptimizer()
    vocabulary = read_query_vocabulary(settings.query_vocabulary_path)
    return QueryOptimizer(
        abbreviations=abbreviation_table(vocabulary, mode=settings.query_vocabulary_mode),
        listed_names=vocabulary.entities,
    )
