"""OpenSearch's built-in `english` analyzer against the mapping's `english_folded`, lexical only, on noida-db.

What changing the analyzer does to BM25 ranking alone, on Lucene-exact BM25 (noida-db, the
Elasticsearch-API server from PyPI): each BEIR data set's corpus is indexed once per analyzer into one
text field (title, a newline, the text) and every query of the split is a `match` on it; nDCG@10 and
Recall@10 over the qrels. The service's own lexical query (several fields, boosts, context) is not used:
this isolates the analyzer. Slow: noida-db takes about 3 minutes per data set and analyzer on 2 cores.

Usage:
    .venv/bin/python scripts/compare_opensearch_analyzers.py --datasets ../shared/datasets/scifact ../shared/datasets/locomo
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import subprocess
import tempfile
import time
import urllib.request
from importlib.resources import files
from pathlib import Path
from typing import Any

import loopback_service
from opensearchpy import AsyncOpenSearch
from opensearchpy.helpers import async_bulk

from app.engines.opensearch_mapping import TEXT_ANALYZER, index_body

READY_TIMEOUT_S = 20.0
TOP_K = 10


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines]


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    with path.open(encoding="utf-8") as lines:
        next(lines)  # the header
        for line in lines:
            query_id, document_id, grade = line.split()[:3]
            qrels.setdefault(query_id, {})[document_id] = int(grade)
    return qrels


def ndcg_at_10(ranked: list[str], relevant: dict[str, int]) -> float:
    gain = sum(relevant.get(document, 0) / math.log2(rank + 2) for rank, document in enumerate(ranked[:TOP_K]))
    ideal = sum(
        grade / math.log2(rank + 2) for rank, grade in enumerate(sorted(relevant.values(), reverse=True)[:TOP_K])
    )
    return gain / ideal if ideal else 0.0


def recall_at_10(ranked: list[str], relevant: dict[str, int]) -> float:
    wanted = {document for document, grade in relevant.items() if grade > 0}
    return len(wanted.intersection(ranked[:TOP_K])) / len(wanted) if wanted else 0.0


def analyses() -> dict[str, dict[str, Any]]:
    """Index settings per analyzer: the built-in one, and the mapping's own (its `analysis` block as is)."""
    folded = index_body(shards=1, replicas=0)["settings"]["analysis"]
    return {
        "english (built-in, schema 8)": {"analyzer": "english", "analysis": {}},
        f"{TEXT_ANALYZER} (schema 9)": {"analyzer": TEXT_ANALYZER, "analysis": folded},
    }


async def measure(url: str, dataset: Path, split: str) -> None:
    client = AsyncOpenSearch(hosts=[url], timeout=120)
    corpus = read_jsonl(dataset / "corpus.jsonl")
    queries = {query["_id"]: query["text"] for query in read_jsonl(dataset / "queries.jsonl")}
    qrels = read_qrels(dataset / "qrels" / f"{split}.tsv")
    try:
        for number, (name, analysis) in enumerate(analyses().items()):
            index = f"{dataset.name.lower()}-{number}"
            settings = {"number_of_shards": 1, "number_of_replicas": 0, "analysis": analysis["analysis"]}
            mapping = {"properties": {"text": {"type": "text", "analyzer": analysis["analyzer"]}}}
            await client.indices.create(index=index, body={"settings": settings, "mappings": mapping})
            actions = (
                {"_index": index, "_id": document["_id"], "text": f"{document.get('title') or ''}\n{document['text']}"}
                for document in corpus
            )
            await async_bulk(client, actions, chunk_size=500)
            await client.indices.refresh(index=index)
            ndcg, recall = [], []
            for query_id, relevant in qrels.items():
                body = {"size": TOP_K, "query": {"match": {"text": queries[query_id]}}, "_source": False}
                found = await client.search(index=index, body=body)
                ranked = [hit["_id"] for hit in found["hits"]["hits"]]
                ndcg.append(ndcg_at_10(ranked, relevant))
                recall.append(recall_at_10(ranked, relevant))
            print(
                f"{dataset.name} {split} {name}: nDCG@10 {sum(ndcg) / len(ndcg):.4f}  "
                f"Recall@10 {sum(recall) / len(recall):.4f}  ({len(ndcg)} queries)",
                flush=True,
            )
    finally:
        await client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", type=Path, nargs="+", required=True, help="BEIR-layout folders")
    parser.add_argument("--split", default="test")
    arguments = parser.parse_args()
    port = loopback_service.free_port()
    with tempfile.TemporaryDirectory() as data_dir:
        command = [str(files("noida_db").joinpath("noida-db")), "start", "--only", "elasticsearch"]
        command += ["--host", "127.0.0.1", "--elasticsearch-port", str(port), "--data-dir", data_dir]
        server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + READY_TIMEOUT_S
            while True:
                try:
                    with urllib.request.urlopen(url, timeout=1):
                        break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
            for dataset in arguments.datasets:
                asyncio.run(measure(url, dataset, arguments.split))
        finally:
            server.terminate()
            server.wait(timeout=30)


if __name__ == "__main__":
    main()
