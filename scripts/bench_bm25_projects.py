"""Cost of an index per project (tantivy or OpenSearch): write time, search latency and size per project count.

For each `--projects` value P, a fresh root gets P projects of `--chunks-per-project` SciFact abstracts each
(distinct abstracts per project, one chunk per document, `--batch` documents per `replace_documents`, as the
outbox writes them), through the real `TantivyLexicalIndex`. Then `--queries` SciFact queries are searched,
each in a project drawn round-robin: once "warm" (indexes open, as a running service has them) and once
"cold" (a fresh adapter on the same root: each project's first search opens its index). A baseline puts the
same P x chunks into one project (what one shared index held before per-project indexes) and is measured
the same way in the same run, so the per-project layout is read as a ratio against it.

Prints one JSON object per configuration; disk is `du` of the root (apparent bytes of every file).
Timings depend on the machine: say where they were measured.

`--engine opensearch` measures the real `OpenSearchLexicalIndex` against a fresh `osmem-server` (the
OpenSearch-API emulator from PyPI the tests use, on loopback) per configuration, or `--opensearch-url`
(every index it creates under `--opensearch-index` is deleted afterwards). "Cold" is then a fresh client
and adapter; the per-project overhead is the time each project's first write spends creating its index
(`create_ms_*`, separate from `write_s`) and the growth of the server's resident memory over the baseline's
for the same chunks (an emulator's memory, not a JVM's heap).

Usage:
    .venv/bin/python scripts/bench_bm25_projects.py --dataset ../shared/datasets/scifact --projects 1 10 100
    .venv/bin/python scripts/bench_bm25_projects.py --engine opensearch --dataset ../shared/datasets/scifact
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from opensearchpy import AsyncOpenSearch
from osmem_server import OsmemServer

from app.domain.models import Chunk, DocumentChunks, Filters, LexicalQuery
from app.engines.opensearch import OpenSearchLexicalIndex
from app.engines.tantivy_index import TantivyLexicalIndex

SPANNING_ROUNDS = 8
"""Timed batches per spanning width."""


def read_jsonl(path: Path, limit: int) -> list[dict[str, Any]]:
    records = []
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            records.append(json.loads(line))
            if len(records) == limit:
                break
    return records


def chunk_of(record: dict[str, Any], project_id: str) -> Chunk:
    return Chunk(
        chunk_id=f"{project_id}:{record['_id']}",
        document_id=str(record["_id"]),
        project_id=project_id,
        text=str(record["text"]),
        source=f"scifact/{record['_id']}",
        level="L1",
        breadcrumb=(str(record.get("title", "")),),
        section_title=str(record.get("title", "")),
        position=0,
        tags=(),
        event_time=None,
        chunk_hash=f"hash-{record['_id']}",
        context="",
    )


def du_bytes(path: Path) -> int:
    return sum(entry.stat().st_size for entry in path.rglob("*") if entry.is_file())


def result_row(*, projects: int, chunks: int, write_s: float, warm: list[float], cold: list[float]) -> dict[str, Any]:
    """What every engine's row reports: counts, write rate, warm and cold search latency."""
    return {
        "projects": projects,
        "chunks": chunks,
        "write_s": round(write_s, 3),
        "write_chunks_per_s": round(chunks / write_s, 1),
        "search_warm_p50_ms": percentile_ms(warm, 0.5),
        "search_warm_p95_ms": percentile_ms(warm, 0.95),
        "search_cold_p50_ms": percentile_ms(cold, 0.5),
        "search_cold_p95_ms": percentile_ms(cold, 0.95),
    }


def percentile_ms(samples_s: list[float], fraction: float) -> float:
    ordered = sorted(samples_s)
    return round(1000 * ordered[min(len(ordered) - 1, int(fraction * len(ordered)))], 3)


async def write_projects(root: Path, layout: dict[str, list[dict[str, Any]]], batch: int) -> float:
    """Write every project's chunks in outbox-sized batches; seconds taken."""
    index = TantivyLexicalIndex(root)
    started = time.perf_counter()
    for project_id, records in layout.items():
        for start in range(0, len(records), batch):
            documents = [
                DocumentChunks(project_id, str(record["_id"]), (chunk_of(record, project_id),))
                for record in records[start : start + batch]
            ]
            await index.replace_documents(documents)
    elapsed = time.perf_counter() - started
    await index.close()
    return elapsed


async def search_latencies(
    index: TantivyLexicalIndex | OpenSearchLexicalIndex, queries: list[str], projects: list[str]
) -> list[float]:
    samples = []
    for number, text in enumerate(queries):
        filters = Filters(project_id=projects[number % len(projects)])
        started = time.perf_counter()
        await index.search(LexicalQuery(text=text), top_k=10, filters=filters)
        samples.append(time.perf_counter() - started)
    return samples


async def measure(
    root: Path, layout: dict[str, list[dict[str, Any]]], queries: list[str], batch: int
) -> dict[str, Any]:
    write_s = await write_projects(root, layout, batch)
    projects = list(layout)
    cold_index = TantivyLexicalIndex(root)
    cold = await search_latencies(cold_index, queries[: len(projects)], projects)  # first search of each project
    warm = await search_latencies(cold_index, queries, projects)
    await cold_index.close()
    chunks = sum(len(records) for records in layout.values())
    disk = du_bytes(root)
    return {
        **result_row(projects=len(projects), chunks=chunks, write_s=write_s, warm=warm, cold=cold),
        "disk_bytes": disk,
        "disk_bytes_per_project": disk // len(projects),
    }


def documents_in_batches(layout: dict[str, list[dict[str, Any]]], batch: int) -> list[list[DocumentChunks]]:
    """Each project's documents in outbox-sized batches, project after project (as `write_projects`)."""
    return [
        [
            DocumentChunks(project_id, str(record["_id"]), (chunk_of(record, project_id),))
            for record in records[start : start + batch]
        ]
        for project_id, records in layout.items()
        for start in range(0, len(records), batch)
    ]


def resident_bytes(pid: int) -> int | None:
    """The process's resident memory (Linux `/proc`); None where it cannot be read."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text(encoding="ascii").splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


async def measure_opensearch(
    url: str, base: str, layout: dict[str, list[dict[str, Any]]], queries: list[str], batch: int
) -> dict[str, Any]:
    """As `measure`, on OpenSearch: index creation (first write of each project) timed apart from the writes."""
    projects = list(layout)
    client = AsyncOpenSearch(hosts=[url], timeout=60)
    index = OpenSearchLexicalIndex(client, index=base, timeout_s=60.0, replicas=0)
    create_s = []
    for project_id in projects:
        started = time.perf_counter()
        await index.generation.verify([project_id], {})  # what a project's first write does first
        create_s.append(time.perf_counter() - started)
    started = time.perf_counter()
    for documents in documents_in_batches(layout, batch):
        await index.replace_documents(documents)
    write_s = time.perf_counter() - started
    await client.close()
    cold_client = AsyncOpenSearch(hosts=[url], timeout=60)
    cold_index = OpenSearchLexicalIndex(cold_client, index=base, timeout_s=60.0, replicas=0)
    cold = await search_latencies(cold_index, queries[: len(projects)], projects)
    warm = await search_latencies(cold_index, queries, projects)
    await cold_client.close()
    chunks = sum(len(records) for records in layout.values())
    return {
        **result_row(projects=len(projects), chunks=chunks, write_s=write_s, warm=warm, cold=cold),
        "create_ms_p50": percentile_ms(create_s, 0.5),
        "create_ms_p95": percentile_ms(create_s, 0.95),
    }


async def measure_spanning(url: str, base: str, corpus: list[dict[str, Any]], spans: list[int], batch: int) -> None:
    """Batches of `batch` documents spread over K projects each (K in `spans`): ms per batch, one JSON line per K.

    The projects' indexes exist before timing starts (their first write is `create_ms_*` above), so this is
    what a batch spanning projects costs in steady state: one generation check per project, then one bulk,
    one delete-by-query and one marker read for the whole batch.
    """
    client = AsyncOpenSearch(hosts=[url], timeout=60)
    index = OpenSearchLexicalIndex(client, index=base, timeout_s=60.0, replicas=0)
    for span in spans:
        projects = [f"span-{span}-{number}" for number in range(span)]
        await index.generation.verify(projects, {})
        samples = []
        for round_number in range(SPANNING_ROUNDS):
            records = corpus[round_number * batch : (round_number + 1) * batch]
            documents = [
                DocumentChunks(projects[n % span], str(r["_id"]), (chunk_of(r, projects[n % span]),), round_number + 1)
                for n, r in enumerate(records)
            ]
            started = time.perf_counter()
            await index.replace_documents(documents)
            samples.append(time.perf_counter() - started)
        result = {"batch_documents": batch, "spanning_projects": span, "batch_ms_p50": percentile_ms(samples, 0.5)}
        print(json.dumps({"engine": "opensearch", "layout": "spanning_batches", **result}), flush=True)
    await client.close()


async def run_opensearch(arguments: argparse.Namespace, name: str, layout: dict[str, list[dict[str, Any]]]) -> None:
    """One configuration on a fresh osmem-server (or `--opensearch-url`), cleaned up after."""
    server = None if arguments.opensearch_url else OsmemServer.start(japanese=False, addr="127.0.0.1:0")
    url = arguments.opensearch_url or server.url  # type: ignore[union-attr]
    base = f"{arguments.opensearch_index}-{name.replace('_', '-')}-{len(layout)}"
    try:
        idle_rss = resident_bytes(server.pid) if server else None
        result = await measure_opensearch(url, base, layout, arguments.query_texts, arguments.batch)
        if server is not None and idle_rss is not None:
            rss = resident_bytes(server.pid) or idle_rss
            result |= {"server_rss_growth_bytes": rss - idle_rss}  # minus the baseline's: what the indexes cost
        print(
            json.dumps({"engine": "opensearch", "layout": name, "of_projects": arguments.count, **result}), flush=True
        )
        if arguments.spanning and name == "per_project" and arguments.count == max(arguments.projects):
            await measure_spanning(url, f"{base}-spanning", arguments.corpus, arguments.spanning, arguments.batch)
    finally:
        if server is not None:
            server.close()
        else:
            client = AsyncOpenSearch(hosts=[url])
            names = sorted(await client.indices.get_settings(index=f"{base}-p-*,{base}-spanning-p-*"))
            if names:
                await client.indices.delete(index=",".join(names))
            await client.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", type=Path, required=True, help="a BEIR folder (corpus.jsonl, queries.jsonl)")
    parser.add_argument("--projects", type=int, nargs="+", default=[1, 10, 100])
    parser.add_argument("--chunks-per-project", type=int, default=50)
    parser.add_argument("--batch", type=int, default=25, help="documents per replace_documents call")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--engine", choices=["tantivy", "opensearch"], default="tantivy")
    parser.add_argument("--opensearch-url", help="a real cluster (default: a fresh osmem-server per configuration)")
    parser.add_argument("--opensearch-index", default="bench-bm25", help="base of the indexes created (deleted after)")
    parser.add_argument(
        "--spanning", type=int, nargs="*", default=[1, 5, 25], help="opensearch: projects per timed write batch"
    )
    arguments = parser.parse_args()
    most = max(arguments.projects) * arguments.chunks_per_project
    corpus = read_jsonl(arguments.dataset / "corpus.jsonl", max(most, SPANNING_ROUNDS * arguments.batch))
    queries = [str(record["text"]) for record in read_jsonl(arguments.dataset / "queries.jsonl", arguments.queries)]
    per = arguments.chunks_per_project
    for count in arguments.projects:
        records = corpus[: count * per]
        layouts = {
            "per_project": {f"proj-{number}": records[number * per : (number + 1) * per] for number in range(count)},
            "one_project_baseline": {"proj-all": records},
        }
        for name, layout in layouts.items():
            if name == "one_project_baseline" and count == 1:
                continue  # the same thing as the per-project layout
            if arguments.engine == "opensearch":
                arguments.count, arguments.query_texts, arguments.corpus = count, queries, corpus
                await run_opensearch(arguments, name, layout)
                continue
            root = Path(tempfile.mkdtemp(prefix="bench-bm25-"))
            try:
                result = await measure(root / "lexical", layout, queries, arguments.batch)
            finally:
                shutil.rmtree(root)
            print(json.dumps({"layout": name, "of_projects": count, **result}), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
