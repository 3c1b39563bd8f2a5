"""Scale curve: cost of one corpus size in the embedded default (PostgreSQL+pgvector, tantivy), HTTP end to end.

Corpus: real text, vectors from the real model composed cheaply (how and with which bias: the docstring
of `scripts/scale_corpus.py`). Steps, per `--sizes` value N:

1. `embed`: embeds the first `--base-texts` distinct real sentences once with the bundled model and caches
   the pooled vectors under `.cache/bench-scale/` (resumable; later runs reuse them).
2. Loads N chunks (10 per document, project `scale`) into a fresh embedded data dir, *bypassing HTTP
   ingest*: the schema comes from the real migrations, rows go in with `COPY`, the HNSW index is dropped
   and rebuilt after the load (timed: that is the index build), the lexical index is filled through the
   `TantivyLexicalIndex` adapter (timed). Disk is measured with du, index sizes from PostgreSQL.
3. Starts `poimen serve` on it (query cache off) and sends distinct real queries (SciFact test queries,
   LoCoMo questions) one at a time over one keep-alive connection, per strategy; p50/p95/p99 end to end.
4. Recall@10 of the HNSW leg against exact search (`enable_indexscan = off`, same table, same SQL, custom plans only) for an
   `ef_search` sweep, with the product's session settings (iterative scan, relaxed order). The HNSW pass forces
   the index (`enable_seqscan = off`: on a small table the planner may sort every row instead) and records
   whether the planner picks it unforced (`planner_picks_hnsw_by_default`).
5. With `--halfvec`, also builds an HNSW index over `embedding::halfvec(384)` and reports its size,
   build time and recall (a measured option; the product's column stays `vector`).

`latency` serves a folder `run --keep` left and repeats step 3 `--repeat` times, each on queries not sent
earlier in this invocation (a second invocation sends the same ones again, to warmer buffers), with a
fresh server each time: how far the p95s and the hybrid / slower-leg ratio move between runs of one build
(at 100k: 1.16 to 1.29, docs/benchmarks/scale-curve.md).

Usage:
    .venv/bin/python scripts/bench_scale.py embed --base-texts 20000
    .venv/bin/python scripts/bench_scale.py run --sizes 10000 100000 --json docs/benchmarks/scale-curve.json
    .venv/bin/python scripts/bench_scale.py plot docs/benchmarks/scale-curve.json
    .venv/bin/python scripts/bench_scale.py run --sizes 100000 --keep && \
        .venv/bin/python scripts/bench_scale.py latency --size 100000 --queries 300 --repeat 3
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import itertools
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_query
import loopback_service
from bench_query import percentiles, start_server
from load_server import machine_description
from scale_corpus import base_texts, chunk_plan, chunk_text, pair_vectors, recall_at_k
from scale_vectors import embed_base_texts, load_base_vectors

if TYPE_CHECKING:
    import subprocess
    from collections.abc import Sequence

    import numpy as np
    import numpy.typing as npt

REPOSITORY: Final = Path(__file__).resolve().parents[1]
DATASETS: Final = REPOSITORY.parent / "shared" / "datasets"
CACHE: Final = REPOSITORY / ".cache" / "bench-scale"
PROJECT: Final = "scale"
CHUNKS_PER_DOCUMENT: Final = 10
MODEL: Final = "all-MiniLM-L6-v2"
STRATEGIES: Final = ("hybrid", "semantic", "lexical")
WARMUP_QUERIES: Final = 10
LOAD_BATCH_ROWS: Final = 5000
LEXICAL_BATCH_DOCUMENTS: Final = 500
MAINTENANCE_WORK_MEM: Final = "3GB"
"""Enough for the whole graph of 1M x 384 (about 2 GB): a graph that overflows it builds far slower."""
PARALLEL_MAINTENANCE_WORKERS: Final = 1
"""Two cores shared with other work: one worker beside the leader."""
HNSW_INDEX: Final = "chunks_embedding_hnsw_idx"
CREATE_HNSW: Final = (
    f"CREATE INDEX {HNSW_INDEX} ON chunks USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)"
)
CREATE_HALFVEC_HNSW: Final = (
    "CREATE INDEX chunks_embedding_halfvec_idx ON chunks USING hnsw "
    "((embedding::halfvec(384)) halfvec_cosine_ops) WITH (m = 16, ef_construction = 64)"
)
NEAREST: Final = (
    "SELECT chunk_id, embedding <=> $1 AS distance FROM chunks WHERE project_id = $2 ORDER BY embedding <=> $1 LIMIT 10"
)
NEAREST_HALFVEC: Final = (
    "SELECT chunk_id, embedding <=> $1 AS distance FROM chunks WHERE project_id = $2 "
    "ORDER BY embedding::halfvec(384) <=> $1::vector::halfvec(384) LIMIT 10"
)


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    embed = commands.add_parser("embed", help="embed base texts into the cache")
    embed.add_argument("--base-texts", type=int, default=20000)
    run = commands.add_parser("run", help="load, serve and measure each size")
    run.add_argument("--sizes", type=int, nargs="+", default=[10000, 100000])
    run.add_argument("--base-texts", type=int, default=6000, help="use this many embedded base texts")
    run.add_argument("--queries", type=int, default=200, help="distinct queries per strategy")
    run.add_argument("--recall-queries", type=int, default=100)
    run.add_argument("--ef-search", type=int, nargs="+", default=[40, 100, 200])
    run.add_argument("--halfvec", action="store_true", help="also measure a halfvec HNSW index")
    run.add_argument("--recall-only", action="store_true", help="load and build, then only measure recall")
    run.add_argument("--keep", action="store_true", help="keep each size's data dir under the cache")
    run.add_argument("--json", type=Path, default=None, help="merge results into this JSON file")
    latency = commands.add_parser("latency", help="measure a kept size again, --repeat times")
    latency.add_argument("--size", type=int, required=True, help="a size `run --keep` left under the cache")
    latency.add_argument("--queries", type=int, default=300, help="distinct queries per strategy and run")
    latency.add_argument("--repeat", type=int, default=3)
    plot = commands.add_parser("plot", help="draw the scale curve of a JSON file")
    plot.add_argument("json", type=Path)
    check = commands.add_parser("check-composition", help="composed vs really embedded pair vectors")
    check.add_argument("--pairs", type=int, default=200)
    return parser.parse_args(argv)


def load_queries(limit: int) -> list[str]:
    """Distinct real queries: SciFact test queries and LoCoMo questions, interleaved."""
    lists: list[list[str]] = []
    for name in ("scifact", "locomo"):
        dataset = DATASETS / name
        wanted = {line.split("\t", 1)[0] for line in (dataset / "qrels" / "test.tsv").read_text().splitlines()[1:]}
        with (dataset / "queries.jsonl").open(encoding="utf-8") as lines:
            records = [json.loads(line) for line in lines]
        lists.append([record["text"] for record in records if str(record["_id"]) in wanted])
    # Alternating while both last, then the rest of the longer list (LoCoMo has about 2,000 questions).
    interleaved = [text for pair in itertools.zip_longest(*lists) for text in pair if text is not None]
    return list(dict.fromkeys(interleaved))[:limit]


def corpus(size: int, base_count: int) -> tuple[list[str], npt.NDArray[np.float32], dict[str, Any]]:
    texts = base_texts(DATASETS)
    pooled, tokens = load_base_vectors(texts, CACHE)
    if len(pooled) < base_count:
        msg = f"only {len(pooled)} base texts embedded, {base_count} asked: run `bench_scale.py embed` longer"
        raise RuntimeError(msg)
    pooled, tokens = pooled[:base_count], tokens[:base_count]
    plan = chunk_plan(size, len(pooled))
    chunk_texts = [chunk_text(texts, entry) for entry in plan]
    singles = sum(entry[1] is None for entry in plan)
    info = {"base_texts_embedded": len(pooled), "real_vectors": singles, "composed_vectors": size - singles}
    return chunk_texts, pair_vectors(pooled, tokens, plan), info


def du_bytes(path: Path) -> int:
    return sum(entry.stat().st_size for entry in path.rglob("*") if entry.is_file())


async def load_postgres(url: str, texts: Sequence[str], vectors: npt.NDArray[np.float32]) -> dict[str, Any]:
    import asyncpg  # noqa: PLC0415 - only the run command needs the driver
    from pgvector.asyncpg import register_vector  # noqa: PLC0415

    connection = await asyncpg.connect(url)
    await register_vector(connection)
    try:
        await connection.execute(f"DROP INDEX IF EXISTS {HNSW_INDEX}")
        started = time.perf_counter()
        documents = [
            (PROJECT, f"doc-{number}", f"scale/{number}", f"scale document {number}", f"hash-{number}")
            for number in range((len(texts) + CHUNKS_PER_DOCUMENT - 1) // CHUNKS_PER_DOCUMENT)
        ]
        await connection.copy_records_to_table(
            "documents",
            records=documents,
            columns=["project_id", "document_id", "source", "title", "content_hash"],
        )
        columns = [
            "project_id",
            "chunk_id",
            "document_id",
            "text",
            "source",
            "level",
            "section_title",
            "position",
            "chunk_hash",
            "embedding",
            "embedding_model",
            "lexically_indexed",
        ]
        for first in range(0, len(texts), LOAD_BATCH_ROWS):
            rows = []
            for index in range(first, min(first + LOAD_BATCH_ROWS, len(texts))):
                document, position = divmod(index, CHUNKS_PER_DOCUMENT)
                rows.append(
                    (
                        PROJECT,
                        f"doc-{document}#{position}",
                        f"doc-{document}",
                        texts[index],
                        f"scale/{document}",
                        "paragraph",
                        "",
                        position,
                        f"chunk-{index}",
                        vectors[index],
                        MODEL,
                        True,
                    )
                )
            await connection.copy_records_to_table("chunks", records=rows, columns=columns)
        load_s = time.perf_counter() - started
        await connection.execute("VACUUM ANALYZE chunks")
        await connection.execute(f"SET maintenance_work_mem = '{MAINTENANCE_WORK_MEM}'")
        await connection.execute(f"SET max_parallel_maintenance_workers = {PARALLEL_MAINTENANCE_WORKERS}")
        started = time.perf_counter()
        await connection.execute(CREATE_HNSW)
        build_s = time.perf_counter() - started
        sizes = await connection.fetchrow(
            "SELECT pg_relation_size($1::regclass) AS hnsw, pg_total_relation_size('chunks') AS chunks_total, "
            "pg_table_size('chunks') AS chunks_heap, pg_database_size(current_database()) AS database, "
            "current_setting('shared_buffers') AS shared_buffers",
            HNSW_INDEX,
        )
    finally:
        await connection.close()
    return {
        "copy_s": round(load_s, 1),
        "hnsw_build_s": round(build_s, 1),
        "hnsw_index_bytes": sizes["hnsw"],
        "chunks_heap_bytes": sizes["chunks_heap"],
        "chunks_total_bytes": sizes["chunks_total"],
        "database_bytes": sizes["database"],
        "shared_buffers": sizes["shared_buffers"],
        "maintenance_work_mem": MAINTENANCE_WORK_MEM,
        "max_parallel_maintenance_workers": PARALLEL_MAINTENANCE_WORKERS,
    }


async def load_lexical(path: Path, texts: Sequence[str]) -> float:
    from app.domain.models import Chunk, DocumentChunks  # noqa: PLC0415 - the product's own types
    from app.engines.tantivy_index import TantivyLexicalIndex  # noqa: PLC0415

    index = TantivyLexicalIndex(path)
    started = time.perf_counter()
    try:
        batch: list[DocumentChunks] = []
        for first in range(0, len(texts), CHUNKS_PER_DOCUMENT):
            document = first // CHUNKS_PER_DOCUMENT
            chunks = tuple(
                Chunk(
                    chunk_id=f"doc-{document}#{index - first}",
                    document_id=f"doc-{document}",
                    project_id=PROJECT,
                    text=texts[index],
                    source=f"scale/{document}",
                    level="paragraph",
                    breadcrumb=(),
                    section_title="",
                    position=index - first,
                    chunk_hash=f"chunk-{index}",
                )
                for index in range(first, min(first + CHUNKS_PER_DOCUMENT, len(texts)))
            )
            batch.append(DocumentChunks(project_id=PROJECT, document_id=f"doc-{document}", chunks=chunks))
            if len(batch) == LEXICAL_BATCH_DOCUMENTS:
                await index.replace_documents(batch)
                batch = []
        await index.replace_documents(batch)
    finally:
        await index.close()
    return time.perf_counter() - started


def search(connection: http.client.HTTPConnection, query: str, strategy: str) -> tuple[float, dict[str, Any]]:
    elapsed_ms, body = bench_query.search(connection, query, strategy=strategy, limit=10, project=PROJECT)
    if body["cached"] or body["degraded"]:
        msg = f"{strategy} {query[:40]!r}: cached or degraded, not a measurement"
        raise RuntimeError(msg)
    return elapsed_ms, body


def measure_latency(port: int, queries: Sequence[str]) -> dict[str, Any]:
    """Strategies interleaved query by query, so a burst of load elsewhere hits them alike, each on its own queries.

    After the warm-up, query i goes to strategy i mod 3: every measured query is new to the server. Sending
    one text to every strategy in turn let the later ones read the HNSW pages the first had just pulled into
    PostgreSQL's buffers (at 100k chunks the index outgrows the default 128 MB): hybrid, always first, showed
    a 1.42 x p95 against the semantic leg that became 1.06 x with semantic first.
    """
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    for query in queries[:WARMUP_QUERIES]:
        for strategy in STRATEGIES:
            search(connection, query, strategy)
    client_ms: dict[str, list[float]] = {strategy: [] for strategy in STRATEGIES}
    stage_ms: dict[str, dict[str, list[float]]] = {strategy: {} for strategy in STRATEGIES}
    empty = dict.fromkeys(STRATEGIES, 0)
    measured = queries[WARMUP_QUERIES:]
    per_strategy = len(measured) // len(STRATEGIES)
    for position, query in enumerate(measured[: per_strategy * len(STRATEGIES)]):
        strategy = STRATEGIES[position % len(STRATEGIES)]
        elapsed_ms, body = search(connection, query, strategy)
        client_ms[strategy].append(elapsed_ms)
        empty[strategy] += not body["results"]
        for stage in ("embed", "semantic", "lexical", "fusion"):
            stage_ms[strategy].setdefault(stage, []).append(body["metrics"][f"{stage}_time_ms"])
    connection.close()
    if any(count == per_strategy for count in empty.values()):
        msg = f"a strategy answered nothing to every query ({empty}): the index is not loaded"
        raise RuntimeError(msg)
    return {
        strategy: {
            "queries": per_strategy,
            "empty_answers": empty[strategy],
            "end_to_end_ms": percentiles(client_ms[strategy]),
            "stage_p50_ms": {
                stage: round(statistics.median(values), 2) for stage, values in stage_ms[strategy].items()
            },
        }
        for strategy in STRATEGIES
    }


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


async def measure_recall(
    url: str, query_vectors: npt.NDArray[np.float32], ef_searches: Sequence[int], *, halfvec: bool
) -> dict[str, Any]:
    import asyncpg  # noqa: PLC0415
    from pgvector.asyncpg import register_vector  # noqa: PLC0415

    connection = await asyncpg.connect(url)
    await register_vector(connection)
    try:
        await connection.execute("SET jit = off")
        # A prepared statement's cached generic plan ignores later SETs: without this, a plan made while
        # enable_indexscan was off (exact search) would keep scanning the table and report recall 1.0.
        await connection.execute("SET plan_cache_mode = force_custom_plan")
        await connection.execute("SET hnsw.iterative_scan = relaxed_order")
        await connection.execute("SET enable_indexscan = off")
        started = time.perf_counter()
        exact_rows = [await connection.fetch(NEAREST + " -- exact", vector, PROJECT) for vector in query_vectors]
        exact = [[row[0] for row in rows] for rows in exact_rows]
        exact_ms = (time.perf_counter() - started) * 1000 / len(query_vectors)
        await connection.execute("SET enable_indexscan = on")
        sweep: dict[str, Any] = {}
        # On a small table the planner may sort every row rather than walk the index: exact, and what
        # the product does at that size, but not an HNSW measurement. Recorded, then the index is forced.
        default_plan = "\n".join(
            row[0] for row in await connection.fetch("EXPLAIN " + NEAREST, query_vectors[0], PROJECT)
        )
        sweep["planner_picks_hnsw_by_default"] = "Index Scan" in default_plan
        await connection.execute("SET enable_seqscan = off")
        variants = [("vector", NEAREST)]
        if halfvec:
            await connection.execute(f"SET maintenance_work_mem = '{MAINTENANCE_WORK_MEM}'")
            await connection.execute(f"SET max_parallel_maintenance_workers = {PARALLEL_MAINTENANCE_WORKERS}")
            started = time.perf_counter()
            await connection.execute(CREATE_HALFVEC_HNSW)
            sweep["halfvec_build_s"] = round(time.perf_counter() - started, 1)
            sweep["halfvec_index_bytes"] = await connection.fetchval(
                "SELECT pg_relation_size('chunks_embedding_halfvec_idx')"
            )
            variants.append(("halfvec", NEAREST_HALFVEC))
        for label, statement in variants:
            for ef_search in ef_searches:
                await connection.execute(f"SET hnsw.ef_search = {int(ef_search)}")
                plan = "\n".join(
                    row[0] for row in await connection.fetch("EXPLAIN " + statement, query_vectors[0], PROJECT)
                )
                if "Index Scan" not in plan:
                    msg = f"{label} search does not use its HNSW index: {plan}"
                    raise RuntimeError(msg)
                started = time.perf_counter()
                found_rows = [await connection.fetch(statement, vector, PROJECT) for vector in query_vectors]
                found = [[row[0] for row in rows] for rows in found_rows]
                sweep[f"{label}_ef{ef_search}"] = {
                    "recall_at_10": round(recall_at_k(found, exact, k=10), 4),
                    # ann-benchmarks' epsilon recall: a hit counts when no farther than the true 10th
                    # neighbour's cosine distance x 1.01, so a near tie missed is not called a miss.
                    "epsilon_recall_at_10": round(
                        statistics.fmean(
                            sum(row[1] <= truth[-1][1] * 1.01 for row in rows[:10]) / len(truth[:10])
                            for rows, truth in zip(found_rows, exact_rows, strict=True)
                            if truth
                        ),
                        4,
                    ),
                    "sql_ms_mean": round((time.perf_counter() - started) * 1000 / len(query_vectors), 2),
                }
    finally:
        await connection.close()
    return {"exact_sql_ms_mean": round(exact_ms, 1), "queries": len(query_vectors), **sweep}


def query_vectors(queries: Sequence[str]) -> npt.NDArray[np.float32]:
    import numpy as np  # noqa: PLC0415

    from app.engines.embedder import load_embedder  # noqa: PLC0415 - the product's model

    return np.array(load_embedder(MODEL).encode(queries), dtype=np.float32)


async def measure_size(size: int, arguments: argparse.Namespace, queries: list[str]) -> dict[str, Any]:
    from app.engines.embedded_postgres import EmbeddedPostgres  # noqa: PLC0415 - the product's embedded server
    from app.engines.migrate import run_migrations_async  # noqa: PLC0415

    data_dir = CACHE / f"data-{size}"
    shutil.rmtree(data_dir, ignore_errors=True)
    data_dir.mkdir(parents=True)
    texts, vectors, info = corpus(size, arguments.base_texts)
    postgres = EmbeddedPostgres(data_dir / "postgres")
    server: subprocess.Popen[bytes] | None = None
    try:
        url = await asyncio.to_thread(postgres.start)
        await run_migrations_async(url, embedding_dimensions=vectors.shape[1])
        plain_url = "postgresql://" + url.split("://", 1)[1]
        print(f"[{size}] loading PostgreSQL", file=sys.stderr, flush=True)
        result: dict[str, Any] = {
            "chunks": size,
            "corpus": info,
            "postgres": await load_postgres(plain_url, texts, vectors),
        }
        print(f"[{size}] loaded: {json.dumps(result)}; indexing tantivy", file=sys.stderr, flush=True)
        if arguments.recall_only:
            recall = await measure_recall(
                plain_url,
                query_vectors(queries[: arguments.recall_queries]),
                arguments.ef_search,
                halfvec=arguments.halfvec,
            )
            return {"chunks": size, "recall_only": True, "recall": recall, "postgres_rerun": result["postgres"]}
        result["lexical_index_s"] = round(await load_lexical(data_dir / "lexical", texts), 1)
        result["disk_bytes"] = {"postgres": du_bytes(data_dir / "postgres"), "tantivy": du_bytes(data_dir / "lexical")}
        print(f"[{size}] indexed: {json.dumps(result)}; serving and measuring latency", file=sys.stderr, flush=True)
        port = loopback_service.free_port()
        server = start_server(data_dir, port)
        result["machine"] = {
            **machine_description(),  # its load average: how quiet the latency run started
            "client": "same machine, loopback, one keep-alive http.client connection, one query at a time",
            "hnsw_ef_search": os.environ.get("HNSW_EF_SEARCH", "100 (default)"),
        }
        result["latency"] = measure_latency(port, queries)
        result["machine"]["load_average_1m_after_latency"] = round(os.getloadavg()[0], 2)
        result["server_rss_bytes"] = rss_bytes(server.pid)
        server.terminate()
        server.wait(timeout=60)
        server = None
        print(f"[{size}] recall", file=sys.stderr, flush=True)
        result["recall"] = await measure_recall(
            plain_url,
            query_vectors(queries[: arguments.recall_queries]),
            arguments.ef_search,
            halfvec=arguments.halfvec,
        )
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=60)
        await asyncio.to_thread(postgres.stop)
        if not arguments.keep:
            shutil.rmtree(data_dir, ignore_errors=True)
    return result


def measure_kept_size(size: int, *, queries_per_strategy: int, repeat: int) -> int:
    """`measure_latency` `repeat` times on the kept folder of `size`, each run on queries this call has not sent."""
    data_dir = CACHE / f"data-{size}"
    if not (data_dir / "postgres").is_dir():
        print(f"no kept folder {data_dir}: run `run --sizes {size} --keep` first", file=sys.stderr)
        return 1
    per_run = WARMUP_QUERIES + queries_per_strategy * len(STRATEGIES)
    queries = load_queries(per_run * repeat)
    if len(queries) < per_run * repeat:
        print(f"only {len(queries)} distinct queries: lower --queries or --repeat", file=sys.stderr)
        return 1
    ratios = []
    for run in range(repeat):
        port = loopback_service.free_port()
        server = start_server(data_dir, port)
        try:
            latency = measure_latency(port, queries[run * per_run : (run + 1) * per_run])
        finally:
            server.terminate()
            server.wait(timeout=60)
        p95 = {strategy: latency[strategy]["end_to_end_ms"]["p95"] for strategy in STRATEGIES}
        ratios.append(p95["hybrid"] / max(p95["semantic"], p95["lexical"]))
        print(
            json.dumps(
                {"size": size, "run": run + 1, "latency": latency, "hybrid_p95_over_slower_leg": round(ratios[-1], 3)}
            ),
            flush=True,
        )
    print(
        f"hybrid p95 / slower leg p95 over {repeat} runs: {', '.join(f'{ratio:.3f}' for ratio in ratios)}",
        file=sys.stderr,
    )
    return 0


def merge_json(path: Path, results: list[dict[str, Any]]) -> None:
    existing = json.loads(path.read_text()) if path.exists() else {}
    by_size = {entry["chunks"]: entry for entry in existing.get("sizes", [])}
    for entry in results:
        if entry.get("recall_only"):
            # A recall rerun on a rebuilt index replaces only the recall of that size.
            if entry["chunks"] not in by_size:
                msg = f"--recall-only updates a size already in {path}; run {entry['chunks']} in full first"
                raise RuntimeError(msg)
            by_size[entry["chunks"]]["recall"] = {**entry["recall"], "rerun_on_rebuilt_index": True}
        else:
            by_size[entry["chunks"]] = entry
    summary = {
        "machine": "per size, under `machine` (entries measured before it was recorded: see scale-curve.md)",
        "model": MODEL,
        "hnsw": {"m": 16, "ef_construction": 64, "product_ef_search": 100},
        "sizes": [by_size[size] for size in sorted(by_size)],
    }
    path.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    arguments = parse_arguments(argv)
    if arguments.command == "embed":
        embed_base_texts(base_texts(DATASETS), CACHE, count=arguments.base_texts)
        return 0
    if arguments.command == "plot":
        from scale_plot import markdown_table, plot_scale_curve  # noqa: PLC0415 - matplotlib only for this command

        print(f"wrote {os.path.relpath(plot_scale_curve(arguments.json), REPOSITORY)}", file=sys.stderr)
        print(markdown_table(arguments.json))
        return 0
    if arguments.command == "latency":
        return measure_kept_size(arguments.size, queries_per_strategy=arguments.queries, repeat=arguments.repeat)
    if arguments.command == "check-composition":
        from scale_check import check_composition  # noqa: PLC0415

        print(json.dumps(check_composition(DATASETS, CACHE, pairs=arguments.pairs), indent=2))
        return 0
    queries = load_queries(WARMUP_QUERIES + arguments.queries * len(STRATEGIES))  # disjoint per strategy
    results = []
    for size in arguments.sizes:
        result = asyncio.run(measure_size(size, arguments, queries))
        print(json.dumps(result, indent=2), flush=True)
        results.append(result)
        if arguments.json is not None:
            merge_json(arguments.json, [result])
    return 0


if __name__ == "__main__":
    sys.exit(main())
