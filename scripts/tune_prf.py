"""Measure pseudo-relevance feedback (RM3-style) for the lexical leg offline, on cached plans and legs.

Step 1 (needs the engines): every judged query runs once through `SearchService` with the default
configuration (relative dates against the conversation's clock, collapsing off, the fused top `--depth`
kept); the plan the service made, both legs' rankings and every chunk they returned (`RecordingSearcher`)
are pickled to `--cache`.

Step 2 (tantivy alone): for each variant (feedback documents k, expansion terms n, original-query weight
lambda), the top k documents of the service's ranking give the terms (`prf_terms.feedback_terms`: count
in the feedback documents x BM25 IDF of the project's index, stop words out); the lexical leg runs again
with the original terms at lambda / |q| each and the feedback terms at (1 - lambda) x their weight, and
the legs are fused and post-processed exactly as the searcher does (`fuse`, evidence boosts, neighbour
sharing, session cap). A lexical-only plan ranks the expanded leg alone; other plans are unchanged.
Scored with ir-measures, per category, with a paired bootstrap against the unchanged ranking.

Tune on LoCoMo's tuning conversations and SciFact's train split only:

    HF_HUB_OFFLINE=1 .venv/bin/python scripts/tune_prf.py --dataset ../shared/datasets/locomo --split test \
        --groups conv-26,conv-30,conv-41,conv-42,conv-43 --data-dir /tmp/prf/eval --cache /tmp/prf/loco-tune.pkl
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import pickle
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import tantivy

from app.cli.eval_command import open_evaluation_engines
from app.config import load_settings
from app.domain.models import LEXICAL_LEG, SEMANTIC_LEG, Filters, LexicalQuery, ScoredHit, SearchStrategy
from app.engines.tantivy_index import TantivyLexicalIndex
from app.engines.tantivy_schema import CONTENT, PAYLOAD, build_english_analyzer, decode_chunk
from app.evaluation.datasets import project_id_for
from app.evaluation.ingest import ensure_ingested
from app.evaluation.metrics import mean_scores, mean_scores_by, paired_bootstrap, per_query_scores
from app.evaluation.runner import QueryRunner, default_run_spec, document_ranking, metric_names
from app.query.planner import SearchOptions
from app.query.vocabulary import STOPWORDS
from app.retrieval.diversity import cap_per_session
from app.retrieval.evidence import prefer_evidence
from app.retrieval.fusion import fuse, rank_single_leg
from app.retrieval.neighbours import share_neighbour_scores
from app.search.calls import SearchCall

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from app.domain.models import Chunk, FusedHit, SearchPlan
    from app.domain.results import SearchResult
    from app.retrieval.searcher import HybridSearcher

from prf_terms import feedback_terms, interpolated_weights
from tune_fusion import add_dataset_arguments, selected_dataset
from tuning_rows import write_rows


@dataclass
class Case:
    """One judged query as the service ran it: its plan and each leg's (chunk id, raw score) ranking."""

    text: str
    project: str
    category: str | None
    plan: SearchPlan
    legs: dict[str, list[tuple[str, float]]]
    ranking: list[str]  # the service's fused order (chunk ids), best first


@dataclass
class PrfCache:
    cases: dict[str, Case] = field(default_factory=dict)
    chunks: dict[str, Chunk] = field(default_factory=dict)


class RecordingSearcher:
    """Wraps the service's searcher: remembers the last plan and result (queries run one at a time).

    The plan's limit is widened to both legs' retrieve k, so the recorded hits hold every chunk either leg
    returned (the cut to `limit` comes last in the searcher, so the order is the same); the service gets
    its own limit's worth.
    """

    def __init__(self, inner: HybridSearcher) -> None:
        self.inner = inner
        self.last: tuple[SearchPlan, SearchResult] | None = None

    async def search(self, plan: SearchPlan, *, query_embedding: Sequence[float] | None = None) -> SearchResult:
        wide = replace(plan, limit=plan.semantic_retrieve_k + plan.lexical_retrieve_k)
        result = await self.inner.search(wide, query_embedding=query_embedding)
        self.last = (plan, result)
        return replace(result, hits=result.hits[: plan.limit])


async def collect(arguments: argparse.Namespace) -> PrfCache:
    dataset = selected_dataset(arguments)
    settings = load_settings().model_copy(update={"poimen_data_dir": arguments.data_dir})
    cache = PrfCache()
    async with open_evaluation_engines(settings) as engines:
        summary = await ensure_ingested(dataset, engines, settings, marker_dir=arguments.data_dir / "eval-markers")
        service = QueryRunner(dataset, engines, settings, clocks=summary.clocks).service(default_run_spec(settings))
        recorder = RecordingSearcher(service._searcher)  # noqa: SLF001 - a measurement reads the plan the service made
        service._searcher = recorder  # noqa: SLF001
        for number, query in enumerate(dataset.queries, start=1):
            project = project_id_for(dataset.name, query.group)
            options = SearchOptions(project=project, limit=arguments.depth, collapse=False)
            call = SearchCall(
                query=query.text,
                options=options,
                auth_scope="tune",
                caller_key="tune",
                as_of=summary.clocks.get(project),
            )
            recorder.last = None
            outcome = await service.search(call)
            answered = [hit.chunk_id for hit in outcome.result.hits[:5]]
            if recorder.last is None or [hit.chunk_id for hit in recorder.last[1].hits[:5]] != answered:
                message = f"{query.query_id}: the recorded search is not the one the service answered"
                raise RuntimeError(message)
            plan, result = recorder.last
            for hit in result.hits:
                cache.chunks.setdefault(hit.chunk_id, hit.chunk)
            legs = {leg: [(hit.chunk_id, hit.score) for hit in hits] for leg, hits in result.leg_hits.items()}
            missing = {cid for hits in legs.values() for cid, _ in hits} - cache.chunks.keys()
            if missing:
                print(f"  {query.query_id}: {len(missing)} leg chunks beyond the fused depth", flush=True)
            ranking = [hit.chunk_id for hit in result.hits[: plan.limit]]
            cache.cases[query.query_id] = Case(query.text, project, query.category, plan, legs, ranking)
            if number % 200 == 0:
                print(f"  {number}/{len(dataset.queries)}", flush=True)
    return cache


@dataclass(frozen=True)
class Variant:
    documents: int
    terms: int
    original_weight: float
    feedback: str = "fused"  # where the feedback documents come from: "fused" or "lexical"

    @property
    def label(self) -> str:
        source = "" if self.feedback == "fused" else f" from {self.feedback}"
        return f"prf k={self.documents} terms={self.terms} lambda={self.original_weight}{source}"


class Expander:
    """Runs the expanded lexical query against the evaluation's tantivy index (what the leg would send)."""

    def __init__(self, lexical_dir: Path) -> None:
        self.index = TantivyLexicalIndex(lexical_dir)
        self.analyzer = build_english_analyzer()
        self.stop_terms = {term for word in STOPWORDS for term in self.analyzer.analyze(word)}
        self._terms: dict[str, list[str]] = {}
        self._frequency: dict[tuple[str, str], int] = {}
        self._count: dict[str, int] = {}
        self._searchers: dict[str, tantivy.Searcher] = {}
        self._decoded: dict[tuple[str, int, int], Chunk] = {}

    def searcher(self, project: str) -> tantivy.Searcher:
        """One searcher per project for the whole run: the index does not change under a measurement."""
        if project not in self._searchers:
            opened = self.index._projects.get(project, create=False)  # noqa: SLF001 - the adapter exposes no statistics
            if opened is None:
                raise LookupError(project)
            self._searchers[project] = opened.index.searcher()
        return self._searchers[project]

    def chunk_at(self, project: str, address: tantivy.DocAddress) -> Chunk:
        key = (project, address.segment_ord, address.doc)
        if key not in self._decoded:
            self._decoded[key] = decode_chunk(self.searcher(project).doc(address)[PAYLOAD][0])
        return self._decoded[key]

    def chunk_terms(self, chunk: Chunk) -> list[str]:
        if chunk.chunk_id not in self._terms:
            self._terms[chunk.chunk_id] = list(self.analyzer.analyze(chunk.text))
        return self._terms[chunk.chunk_id]

    def statistics(self, project: str) -> tuple[int, Any]:
        searcher = self.searcher(project)
        if project not in self._count:
            self._count[project] = searcher.num_docs

        def frequency(term: str) -> int:
            key = (project, term)
            if key not in self._frequency:
                self._frequency[key] = searcher.doc_freq(CONTENT, term)
            return self._frequency[key]

        return self._count[project], frequency

    def search(self, plan: SearchPlan, expansion: list[tuple[str, float]], original_boost: float) -> list[ScoredHit]:
        builder = self.index._queries  # noqa: SLF001
        original = builder._text_query(plan.lexical_query)  # noqa: SLF001
        filters = builder._filter_clauses(plan.filters)  # noqa: SLF001
        if filters is None:
            return []
        text_clauses = (
            [] if original is None else [(tantivy.Occur.Should, tantivy.Query.boost_query(original, original_boost))]
        )
        text_clauses.extend(
            (tantivy.Occur.Should, tantivy.Query.boost_query(builder._term_clause(term, fuzzy=False), boost))  # noqa: SLF001
            for term, boost in expansion
            if boost > 0
        )
        if not text_clauses:
            return []
        clauses = [(tantivy.Occur.Must, tantivy.Query.boolean_query(text_clauses))]
        clauses.extend((tantivy.Occur.Must, tantivy.Query.const_score_query(clause, 0.0)) for clause in filters)
        clauses.extend(
            (tantivy.Occur.MustNot, clause)
            for clause in builder._excluded_clauses(plan.lexical_query.excluded_terms)  # noqa: SLF001
        )
        project = plan.filters.project_id
        found = (
            self.searcher(project)
            .search(tantivy.Query.boolean_query(clauses), plan.lexical_retrieve_k, count=False)
            .hits
        )
        hits = [ScoredHit(chunk=self.chunk_at(project, address), score=score) for score, address in found]
        hits.sort(key=lambda hit: (-hit.score, hit.chunk_id))
        return hits


def feedback_expansion(
    expander: Expander, project: str, text: str, feedback: list[list[str]], variant: Variant
) -> tuple[float, list[tuple[str, float]]]:
    """(boost of each original term, boosted feedback terms) for one query and its feedback documents."""
    count, frequency = expander.statistics(project)
    expansion = feedback_terms(
        feedback,
        document_frequency=frequency,
        document_count=count,
        term_count=variant.terms,
        stop_terms=expander.stop_terms,
    )
    query_terms = list(expander.analyzer.analyze(text))
    return interpolated_weights(query_terms, expansion, original_weight=variant.original_weight)


def top_documents(expander: Expander, chunks: Iterable[Chunk], count: int) -> list[list[str]]:
    """The analyzed text of the first `count` distinct documents of `chunks` (each at its best chunk)."""
    feedback: list[list[str]] = []
    seen: set[str] = set()
    for chunk in chunks:
        if chunk.document_id in seen:
            continue
        seen.add(chunk.document_id)
        feedback.append(expander.chunk_terms(chunk))
        if len(feedback) == count:
            break
    return feedback


def lexical_alone(arguments: argparse.Namespace, expander: Expander) -> dict[str, dict[str, list[str]]]:
    """Diagnostic without the service: the question text as a plain lexical query, feedback from its own top k."""
    dataset = selected_dataset(arguments)
    first: dict[str, tuple[_LexicalPlan, list[ScoredHit]]] = {}
    for query in dataset.queries:
        plan = _LexicalPlan(
            LexicalQuery(text=query.text), Filters(project_id=project_id_for(dataset.name, query.group))
        )
        first[query.query_id] = (plan, expander.search(plan, [], 1.0))
    runs = {"lexical leg alone": {qid: [hit.chunk.document_id for hit in hits] for qid, (_, hits) in first.items()}}
    for variant in grid(arguments):
        run = {}
        for query_id, (plan, hits) in first.items():
            feedback = top_documents(expander, (hit.chunk for hit in hits), variant.documents)
            boost, boosted = feedback_expansion(
                expander, plan.filters.project_id, plan.lexical_query.text, feedback, variant
            )
            expanded = expander.search(plan, boosted, boost)
            run[query_id] = [hit.chunk.document_id for hit in expanded]
        runs[variant.label] = run
    return runs


@dataclass(frozen=True)
class _LexicalPlan:
    """What `Expander.search` reads of a plan, for the lexical-alone diagnostic."""

    lexical_query: LexicalQuery
    filters: Filters
    lexical_retrieve_k: int = 50


def post_process(plan: SearchPlan, ranked: list[FusedHit]) -> list[FusedHit]:
    """What the searcher does after ranking, before collapsing (the harness collapses by document id)."""
    hits = share_neighbour_scores(prefer_evidence(ranked, plan.evidence), plan.neighbours)
    return cap_per_session(hits, plan.session_cap) if plan.session_cap else hits


def rerank(case: Case, chunks: dict[str, Chunk], lexical: list[ScoredHit] | None) -> list[str]:
    """The document ids of `case` with its lexical leg replaced by `lexical` (None: the recorded one)."""
    plan = case.plan
    if any(chunk_id not in chunks for hits in case.legs.values() for chunk_id, _ in hits):
        return [chunks[cid].document_id for cid in case.ranking]  # a leg hit beyond the cached depth: unchanged
    legs = {leg: [ScoredHit(chunks[cid], score) for cid, score in hits] for leg, hits in case.legs.items()}
    if lexical is not None and LEXICAL_LEG in legs:
        legs[LEXICAL_LEG] = lexical
    if plan.strategy is SearchStrategy.HYBRID:
        ranked = fuse(legs, plan.fusion)
    elif plan.strategy is SearchStrategy.LEXICAL and LEXICAL_LEG in legs:
        ranked = rank_single_leg(legs[LEXICAL_LEG], leg=LEXICAL_LEG)
    elif plan.strategy is SearchStrategy.SEMANTIC and SEMANTIC_LEG in legs:
        ranked = rank_single_leg(legs[SEMANTIC_LEG], leg=SEMANTIC_LEG)
    else:  # cascading or a degraded leg: leave the service's ranking
        return [chunks[cid].document_id for cid in case.ranking]
    return [hit.chunk.document_id for hit in post_process(plan, ranked)]


def expanded_ranking(case: Case, cache: PrfCache, expander: Expander, variant: Variant) -> list[str]:
    if LEXICAL_LEG not in case.legs or case.plan.strategy not in {SearchStrategy.HYBRID, SearchStrategy.LEXICAL}:
        return [cache.chunks[cid].document_id for cid in case.ranking]
    # feedback from the service's fused ranking, or from the lexical leg's own first pass (classic RM3)
    first_pass = case.ranking if variant.feedback == "fused" else [chunk_id for chunk_id, _ in case.legs[LEXICAL_LEG]]
    feedback = top_documents(expander, (cache.chunks[chunk_id] for chunk_id in first_pass), variant.documents)
    original_boost, boosted = feedback_expansion(
        expander, case.project, case.plan.lexical_query.text, feedback, variant
    )
    return rerank(case, cache.chunks, expander.search(case.plan, boosted, original_boost))


def score(arguments: argparse.Namespace, runs: dict[str, dict[str, list[str]]]) -> list[dict[str, object]]:
    dataset = selected_dataset(arguments)
    names = metric_names(dataset)
    primary = "Recall@10" if dataset.conversational else "nDCG@10"
    categories = {query.query_id: query.category for query in dataset.queries}
    baseline: dict[str, dict[str, float]] | None = None
    rows: list[dict[str, object]] = []
    for label, documents in runs.items():
        run = {query_id: document_ranking(query_id, ids) for query_id, ids in documents.items()}
        per_query = per_query_scores(dataset.qrels, run, names)
        baseline = baseline or per_query
        difference, low, high = paired_bootstrap(baseline[primary], per_query[primary])
        overall = mean_scores(per_query)
        by_category = {
            category: round(values["Recall@10"], 4)
            for category, values in mean_scores_by(per_query, categories).items()
        }
        row: dict[str, object] = {
            "variant": label,
            "nDCG@10": round(overall["nDCG@10"], 4),
            "Recall@10": round(overall["Recall@10"], 4),
            f"{primary} minus unchanged": [round(difference, 4), round(low, 4), round(high, 4)],
        }
        if by_category:
            row["Recall@10 by category"] = by_category
        rows.append(row)
        cats = " ".join(f"{key}:{value:.4f}" for key, value in sorted(by_category.items()))
        print(
            f"{label:<36} nDCG@10 {overall['nDCG@10']:.4f} R@10 {overall['Recall@10']:.4f} "
            f"{primary} {difference:+.4f} [{low:+.4f}, {high:+.4f}] {cats}",
            flush=True,
        )
    return rows


def grid(arguments: argparse.Namespace) -> list[Variant]:
    """The product of --documents x --terms x --weights, or the --only labels among them."""
    every = [
        Variant(k, n, w, source)
        for source, k, n, w in itertools.product(
            arguments.feedback.split(","),
            (int(value) for value in arguments.documents.split(",")),
            [int(value) for value in arguments.terms.split(",")],
            [float(value) for value in arguments.weights.split(",")],
        )
    ]
    wanted = {label for label in arguments.only.split(",") if label}
    return [variant for variant in every if not wanted or variant.label in wanted]


def add_cache_arguments(parser: argparse.ArgumentParser) -> None:
    """Step 1's options, shared with `tune_dense_prf.py`: --cache and --depth."""
    parser.add_argument("--cache", type=Path, default=None, help="pickle of plans and legs (built when missing)")
    parser.add_argument("--depth", type=int, default=100, help="fused hits kept per query")


def cached_or_collected(arguments: argparse.Namespace) -> PrfCache:
    """The plans and legs pickled at `--cache`, collected (step 1) and pickled there first when missing."""
    if arguments.cache.is_file():
        cache: PrfCache = pickle.loads(arguments.cache.read_bytes())  # noqa: S301 - our own cache
        return cache
    started = time.perf_counter()
    cache = asyncio.run(collect(arguments))
    arguments.cache.parent.mkdir(parents=True, exist_ok=True)
    arguments.cache.write_bytes(pickle.dumps(cache))
    print(f"collected {len(cache.cases)} queries in {time.perf_counter() - started:.0f} s", flush=True)
    return cache


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_dataset_arguments(parser, split="test")
    add_cache_arguments(parser)
    parser.add_argument("--documents", default="3,5,10", help="feedback documents k swept")
    parser.add_argument("--terms", default="5,10,20", help="expansion terms swept")
    parser.add_argument("--feedback", default="fused", help="feedback from: fused (the service's ranking), lexical")
    parser.add_argument("--weights", default="0.5,0.6,0.7,0.8", help="original-query weights (lambda) swept")
    parser.add_argument("--only", default="", help="comma-separated variant labels to measure (default: the grid)")
    parser.add_argument("--output", type=Path, default=None)
    parser.add_argument("--lexical-alone", action="store_true", help="diagnostic: the lexical leg alone, no service")
    arguments = parser.parse_args()
    if arguments.lexical_alone:
        rows = score(arguments, lexical_alone(arguments, Expander(arguments.data_dir / "lexical")))
        write_rows(arguments, rows)
        return
    cache = cached_or_collected(arguments)
    expander = Expander(arguments.data_dir / "lexical")
    runs: dict[str, dict[str, list[str]]] = {
        "unchanged": {
            qid: [cache.chunks[cid].document_id for cid in case.ranking] for qid, case in cache.cases.items()
        },
        "re-fused (check)": {qid: rerank(case, cache.chunks, None) for qid, case in cache.cases.items()},
        "lambda=1 (check)": {
            qid: expanded_ranking(case, cache, expander, Variant(1, 1, 1.0)) for qid, case in cache.cases.items()
        },
    }
    for variant in grid(arguments):
        runs[variant.label] = {
            qid: expanded_ranking(case, cache, expander, variant) for qid, case in cache.cases.items()
        }
    write_rows(arguments, score(arguments, runs))


if __name__ == "__main__":
    main()
