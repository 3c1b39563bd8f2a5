"""`poimen eval` glue: opens the real engines for the evaluation harness, which may not open them itself."""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from app.cli.commands import drain_or_explain
from app.cli.interrupts import run_interruptibly
from app.evaluation.cli import evaluate
from app.evaluation.ingest import EvaluationEngines
from app.ingestion.outbox import OutboxWorker
from app.wiring.engines import open_engines
from app.wiring.rerankers import build_second_stage

if TYPE_CHECKING:
    import argparse
    from collections.abc import AsyncIterator

    from app.config import Settings


@asynccontextmanager
async def open_evaluation_engines(settings: Settings) -> AsyncIterator[EvaluationEngines]:
    """The same engines the server runs (embedded by default), under `settings.poimen_data_dir`.

    A lexical index emptied at open by a format upgrade is refilled first: a corpus the marker says is ingested
    is not indexed again, and its lexical leg scored 0.
    """
    second_stage = build_second_stage(settings)
    async with open_engines(settings) as engines:
        if engines.lexical_refill_projects:
            await drain_or_explain(OutboxWorker.from_settings(settings, store=engines.store, lexical=engines.lexical))
        yield EvaluationEngines(
            embedder=engines.embedder,
            vector=engines.vector,
            lexical=engines.lexical,
            store=engines.store,
            second_stage=second_stage,
        )


def run_eval(settings: Settings, arguments: argparse.Namespace) -> int:
    """Run `poimen eval` on the real engines; the exit status."""
    return run_interruptibly(evaluate(settings, arguments, open_engines=open_evaluation_engines), command="eval")
