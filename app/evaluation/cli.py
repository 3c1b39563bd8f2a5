"""`poimen eval`: arguments and the evaluation flow. Engines come from an injected opener (the api layer).

Flow per data set: load queries and qrels of the split, ingest the corpus into its own projects under
the evaluation data dir (skipped when the ingest marker matches), run every requested strategy x
fusion through the real search path, score with ir-measures, write the report.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Final

from app.domain.errors import InvalidInputError
from app.evaluation.datasets import (
    CORPUS_FILE,
    QRELS_FOLDER,
    QUERIES_FILE,
    TURN_TITLES,
    TurnShape,
    find_datasets,
    load_dataset,
    read_corpus,
)
from app.evaluation.ingest import ensure_ingested
from app.evaluation.report import primary_metric, results_document, write_report, write_run_files
from app.evaluation.runner import (
    FUSION_NAMES,
    STRATEGY_NAMES,
    QueryRunner,
    default_run_spec,
    run_specs,
)

if TYPE_CHECKING:
    from collections.abc import Callable
    from contextlib import AbstractAsyncContextManager

    from app.config import Settings
    from app.evaluation.datasets import EvalDataset
    from app.evaluation.ingest import EvaluationEngines
    from app.evaluation.runner import RunResult

    EnginesOpener = Callable[[Settings], AbstractAsyncContextManager[EvaluationEngines]]

EVAL_DATA_SUBDIR: Final = "eval"
EVAL_EMBED_TIMEOUT_S: Final = 3600.0
"""The largest INGEST_EMBED_TIMEOUT_S the settings accept."""
MARKER_SUBDIR: Final = "eval-markers"
EXIT_USAGE: Final = 2


def _at_least(low: int) -> Callable[[str], int]:
    """An argparse type for a whole number from `low`.

    `--max-queries 0` scored every query and -1 all but the last; `--turn-context -1` was taken as 0
    without a word.
    """

    def parse(text: str) -> int:
        value = text.strip()
        if not (value.isascii() and value.isdigit()) or int(value) < low:
            msg = f"{text!r} is not a whole number of at least {low}"
            raise argparse.ArgumentTypeError(msg)
        return int(value)

    return parse


def _names(choices: tuple[str, ...]) -> Callable[[str], list[str]]:
    def parse(value: str) -> list[str]:
        names = [name.strip().lower() for name in value.split(",") if name.strip()]
        unknown = [name for name in names if name not in choices]
        if unknown or not names:
            msg = f"choose from {', '.join(choices)} (comma-separated); got {value!r}"
            raise argparse.ArgumentTypeError(msg)
        return names

    return parse


def add_eval_arguments(parser: argparse.ArgumentParser) -> None:
    """Add `poimen eval`'s arguments to `parser`."""
    parser.add_argument(
        "--dataset",
        type=Path,
        required=True,
        help="a BEIR-layout folder (corpus.jsonl, queries.jsonl, qrels/<split>.tsv) or a folder of them",
    )
    parser.add_argument("--split", default="test", help="qrels split to score (default test)")
    parser.add_argument(
        "--strategies",
        type=_names(STRATEGY_NAMES),
        default=list(STRATEGY_NAMES),
        help=f"comma-separated, from {','.join(STRATEGY_NAMES)} (default all); the default configuration's run is "
        "always added, as the one the results are about",
    )
    parser.add_argument(
        "--fusions",
        type=_names(FUSION_NAMES),
        default=list(FUSION_NAMES),
        help=f"comma-separated, from {','.join(FUSION_NAMES)} (default all)",
    )
    parser.add_argument("--output", type=Path, default=None, help="folder for results.json, results.md, results.png")
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="where the evaluation corpus is ingested (default POIMEN_DATA_DIR/eval)",
    )
    parser.add_argument(
        "--max-queries",
        type=_at_least(1),
        default=None,
        help="score only the first N judged queries (N >= 1; the whole corpus is still ingested, once)",
    )
    defaults = TurnShape()
    parser.add_argument(
        "--turn-title",
        choices=TURN_TITLES,
        default=defaults.title,
        help=f"conversational sets: a turn's title is its speaker or '<session date> | <speaker>' "
        f"(default {defaults.title})",
    )
    parser.add_argument(
        "--turn-context",
        type=_at_least(0),
        default=defaults.context_turns,
        help=f"conversational sets: preceding turns of the session embedded as context (0 or more, "
        f"default {defaults.context_turns})",
    )


def evaluation_settings(settings: Settings, arguments: argparse.Namespace) -> Settings:
    """The settings with the data dir moved to the evaluation's own folder, so a running server is untouched.

    Unless INGEST_EMBED_TIMEOUT_S was set, an embedding batch of the evaluation's ingest may take up to
    `EVAL_EMBED_TIMEOUT_S`: the service's 60 s bounds how long a client waits, but an offline evaluation
    on a busy machine has no client, and one slow batch (183 SciFact chunks past 60 s at load average 7)
    used to abort the whole run.
    """
    data_dir = arguments.data_dir or settings.poimen_data_dir / EVAL_DATA_SUBDIR
    update: dict[str, object] = {"poimen_data_dir": data_dir}
    if "ingest_embed_timeout_s" not in settings.model_fields_set:
        update["ingest_embed_timeout_s"] = EVAL_EMBED_TIMEOUT_S
    return settings.model_copy(update=update)


def configuration_summary(settings: Settings, embedding_model: str) -> dict[str, object]:
    """The settings that decide rankings, recorded next to the numbers."""
    return {
        "embedding_model": embedding_model,
        "embedding_backend": settings.embedding_backend,
        "search_strategy": settings.search_strategy.value,
        "query_optimization_enabled": settings.query_optimization_enabled,
        "ranking_algorithm": settings.ranking_algorithm.value,
        "rrf_k_constant": settings.rrf_k_constant,
        "rrf_retrieve_k": settings.rrf_retrieve_k,
        "hybrid_semantic_weight": settings.hybrid_semantic_weight,
        "cascading_lexical_multiplier": settings.cascading_lexical_multiplier,
        "query_entity_extraction": settings.query_entity_extraction,
        "lexical_fuzziness": settings.lexical_fuzziness,
        "chunk_max_chars": settings.chunk_max_chars,
        "chunk_overlap_chars": settings.chunk_overlap_chars,
        "chunk_min_chars": settings.chunk_min_chars,
        "reranker": settings.reranker,
        "rerank_top_n": settings.rerank_top_n,
        "evidence_date_boost": settings.evidence_date_boost,
        "neighbour_score_share": settings.neighbour_score_share,
        "neighbour_window_turns": settings.neighbour_window_turns,
        "semantic_common_name_share": settings.semantic_common_name_share,
    }


async def evaluate(settings: Settings, arguments: argparse.Namespace, *, open_engines: EnginesOpener) -> int:
    """Run `poimen eval` with engines from `open_engines(settings)`; 0 on success, 2 on bad arguments."""
    datasets = _read_datasets(arguments)
    if datasets is None:
        return EXIT_USAGE
    if arguments.output is not None:
        outputs = [arguments.output] if len(datasets) == 1 else [arguments.output / item.name for item in datasets]
        try:  # made now: an output path under a file failed only once every run had finished
            for output in outputs:
                output.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            _say(f"--output {arguments.output}: cannot write there ({error.strerror or error})")
            return EXIT_USAGE
    eval_settings = evaluation_settings(settings, arguments)
    shape = TurnShape(title=arguments.turn_title, context_turns=arguments.turn_context)
    async with open_engines(eval_settings) as engines:
        for dataset in datasets:
            summary = await ensure_ingested(
                dataset,
                engines,
                eval_settings,
                marker_dir=eval_settings.poimen_data_dir / MARKER_SUBDIR,
                shape=shape,
            )
            state = "already ingested" if summary.skipped else f"ingested in {summary.elapsed_s:.0f} s"
            state += f" ({summary.removed} documents no longer in the corpus removed)" if summary.removed else ""
            _say(f"{dataset.name}: {state}; {len(dataset.queries)} judged queries")
            runner = QueryRunner(dataset, engines, eval_settings, clocks=summary.clocks)
            results: list[RunResult] = []
            for spec in run_specs(arguments.strategies, arguments.fusions, eval_settings):
                results.append(await runner.run(spec))
                metric = primary_metric(dataset)
                failed = len(results[-1].failed)
                missed = f" ({failed} failed queries scored as misses)" if failed else ""
                _say(f"  {spec.name}: {metric} {results[-1].metrics[metric]:.4f}{missed}")
            document = results_document(
                dataset,
                results,
                default_run=default_run_spec(eval_settings).name,
                configuration={
                    **configuration_summary(eval_settings, engines.embedder.model_name),
                    **({"turn_shape": shape.describe()} if dataset.conversational else {}),
                },
            )
            if arguments.output is not None:
                output = arguments.output if len(datasets) == 1 else arguments.output / dataset.name
                for path in [*write_report(document, output), *write_run_files(results, output)]:
                    _say(f"  wrote {path}")
    return 0


def _say(message: str) -> None:
    """Progress and outcome lines go to stderr, next to tqdm's bars; stdout stays clean."""
    sys.stderr.write(message + "\n")


def _read_datasets(arguments: argparse.Namespace) -> list[EvalDataset] | None:
    """The data sets `--dataset` names, each read whole; None once a problem with one has been said.

    Each problem is one line that starts with the option and its value (`--dataset PATH: ...`), and the data
    set's folder name when PATH holds several, so a run in CI says which argument to correct.
    """
    folders = find_datasets(arguments.dataset)
    if not folders:
        _say(f"--dataset {arguments.dataset}: no BEIR data set (corpus.jsonl + queries.jsonl) found")
        return None
    datasets = []
    for folder in folders:
        where = f"--dataset {arguments.dataset}" + ("" if folder == arguments.dataset else f": data set {folder.name}")
        try:
            dataset = load_dataset(folder, split=arguments.split)
            # The whole corpus read before any engine starts: a bad line is found now, not after an hour.
            documents = sum(1 for _ in read_corpus(dataset))
        except FileNotFoundError as error:
            _say(f"{where}: no file {error.filename} (read for --split {arguments.split})")
            return None
        except (OSError, UnicodeDecodeError, InvalidInputError) as error:
            _say(f"{where}: {error}")
            return None
        # Nothing to score (an empty file, qrels of other ids, a qrels file not tab-separated): every run
        # scored 0.0000 with exit 0, after an ingest, and read as a retrieval that finds nothing.
        problem = _nothing_to_score(dataset, documents)
        if problem is not None:
            _say(f"{where}: {problem}")
            return None
        if arguments.max_queries:
            dataset = _first_queries(dataset, arguments.max_queries)
        datasets.append(dataset)
    return datasets


def _nothing_to_score(dataset: EvalDataset, documents: int) -> str | None:
    """Why `dataset` holds nothing a run could be scored on (no document, no judged query), or None."""
    if not documents:
        return f"{CORPUS_FILE} holds no documents"
    if not dataset.queries:
        return (
            f"no judged queries: no id of {QUERIES_FILE} has a row scored above 0 in {QRELS_FOLDER}/{dataset.split}.tsv"
            " (tab-separated: query-id, corpus-id, score)"
        )
    return None


def _first_queries(dataset: EvalDataset, count: int) -> EvalDataset:
    from dataclasses import replace  # noqa: PLC0415 - only for this debugging option

    queries = dataset.queries[:count]
    kept = {query.query_id for query in queries}
    return replace(dataset, queries=queries, qrels={query_id: dataset.qrels[query_id] for query_id in kept})
