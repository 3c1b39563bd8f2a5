"""`poimen eval`'s own settings: its data dir, and an ingest that a busy machine cannot abort."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from app.config import Settings
from app.evaluation.cli import EVAL_DATA_SUBDIR, EVAL_EMBED_TIMEOUT_S, evaluation_settings

if TYPE_CHECKING:
    from pathlib import Path

    import pytest


def test_evaluation_waits_longer_for_an_embedding_batch_when_no_timeout_was_set(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("INGEST_EMBED_TIMEOUT_S", raising=False)
    settings = Settings(poimen_data_dir=tmp_path)

    chosen = evaluation_settings(settings, argparse.Namespace(data_dir=None))

    assert settings.ingest_embed_timeout_s == 60.0
    assert chosen.ingest_embed_timeout_s == EVAL_EMBED_TIMEOUT_S
    assert chosen.poimen_data_dir == tmp_path / EVAL_DATA_SUBDIR


def test_evaluation_keeps_an_embedding_timeout_the_operator_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INGEST_EMBED_TIMEOUT_S", "90")

    chosen = evaluation_settings(Settings(), argparse.Namespace(data_dir=None))

    assert chosen.ingest_embed_timeout_s == 90.0
