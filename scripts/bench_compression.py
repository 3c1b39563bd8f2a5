"""Would gzip pay on the API's answers? Their sizes, and the CPU gzip takes on them, per level.

What it does:
1. Builds the app on the embedded default in a throwaway `POIMEN_DATA_DIR` (in process, Litestar's test client)
   and ingests the first `--documents` SciFact abstracts (project `compression`).
2. Takes the answers a client fetches most and the largest it can ask for: a default search (10 hits), a
   50-hit search with `explain`, a batch of 10 such searches, one document, and a documents listing page (the
   export-like page, `limit` 1000, every ingested document).
3. For each, prints its size, its gzip size at levels 1, 6 and 9, the ratio, and the CPU milliseconds one
   compression takes (median of `--repeats`, `time.process_time`), beside the server CPU a search costs
   (docs/benchmarks/load.md: about 8.7 ms per uncached hybrid search, 0.65 ms per cache hit).

Usage:
    .venv/bin/python scripts/bench_compression.py --documents 300
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from litestar.testing import AsyncTestClient

from app.api.app import create_app
from app.config import Settings

REPOSITORY = Path(__file__).resolve().parents[1]
DEFAULT_CORPUS = REPOSITORY.parent / "shared" / "datasets" / "scifact" / "corpus.jsonl"
PROJECT = "compression"
LEVELS = (1, 6, 9)
INGEST_BATCH = 50
QUERY = "stem cells and bone marrow transplantation outcomes"


def parse_arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="BEIR corpus.jsonl")
    parser.add_argument("--documents", type=int, default=300, help="abstracts to ingest")
    parser.add_argument("--repeats", type=int, default=50, help="compressions timed per answer and level")
    return parser.parse_args()


def _documents(corpus: Path, limit: int) -> list[dict[str, str]]:
    rows: list[dict[str, str]] = []
    with corpus.open() as lines:
        for line in lines:
            row = json.loads(line)
            rows.append({"id": row["_id"], "title": row.get("title") or row["_id"], "text": row["text"]})
            if len(rows) == limit:
                break
    return rows


def _cpu_ms(body: bytes, level: int, repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        started = time.process_time()
        gzip.compress(body, compresslevel=level)
        samples.append((time.process_time() - started) * 1000)
    return statistics.median(samples)


async def _answers(client: AsyncTestClient[Any], documents: list[dict[str, str]]) -> dict[str, bytes]:
    for start in range(0, len(documents), INGEST_BATCH):
        written = await client.post(
            f"/v1/projects/{PROJECT}/documents", json={"documents": documents[start : start + INGEST_BATCH]}
        )
        written.raise_for_status()
    search = {"project": PROJECT, "query": QUERY}
    explained = {**search, "limit": 50, "explain": True}
    batch = {
        "project": PROJECT,
        "queries": [{"query": f"{QUERY} {n}", "limit": 50, "explain": True} for n in range(10)],
    }
    requests = {
        "search, 10 hits": client.post("/v1/search", json=search),
        "search, 50 hits, explain": client.post("/v1/search", json=explained),
        "batch of 10 searches, 50 hits, explain": client.post("/v1/search/batch", json=batch),
        "one document": client.get(f"/v1/projects/{PROJECT}/documents/{documents[0]['id']}"),
        f"documents listing, {len(documents)} items": client.get(
            f"/v1/projects/{PROJECT}/documents", params={"limit": "1000"}
        ),
    }
    answers: dict[str, bytes] = {}
    for name, pending in requests.items():
        response = await pending
        response.raise_for_status()
        answers[name] = response.content
    return answers


async def main() -> None:
    arguments = parse_arguments()
    with tempfile.TemporaryDirectory(prefix="bench-compression-") as data_dir:
        settings = Settings(_env_file=None, poimen_data_dir=Path(data_dir), log_json=False)
        async with AsyncTestClient(app=create_app(settings), base_url="http://127.0.0.1", timeout=600) as client:
            answers = await _answers(client, _documents(arguments.corpus, arguments.documents))
    header = "| answer | bytes | " + " | ".join(f"gzip -{level} bytes (ratio) | CPU ms" for level in LEVELS) + " |"
    print(header)
    print("|---|---|" + "---|---|" * len(LEVELS))
    for name, body in answers.items():
        cells = []
        for level in LEVELS:
            size = len(gzip.compress(body, compresslevel=level))
            cells.append(f"{size:,} ({len(body) / size:.1f}x) | {_cpu_ms(body, level, arguments.repeats):.3f}")
        print(f"| {name} | {len(body):,} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    asyncio.run(main())
