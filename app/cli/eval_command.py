"""`poimen eval` glue: opens the real engines for the evaluation harness, which may not open them itself."""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from app.cli.interrupts import run_interruptibly
from app.evaluation.cli import evaluate
from app.evaluation.ingest import EvaluationEngines
from app.wiring.engines import open_engines
from app.wiring.rerankers import build_second_stage

if TYPE_CHECKING:
    import argparse
    from collections.abc import AsyncIterator

    from app.config import Settings


@asynccontextmanager
async def open_evaluation_engines(settings: Settings) -> AsyncIterator[EvaluationEngines]:
    """The same engines the server runs (embedded by default), under `settings.poimen_data_dir`."""
    second_stage = build_second_stage(settings)
    async with open_engines(settings) as engines:
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
