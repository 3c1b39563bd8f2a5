"""What row-level security costs the vector leg: the same filtered HNSW search three ways, interleaved.

1. as the owner (`postgres`, a superuser: no policy applies) in one autocommit statement, as the vector
   leg ran before row-level security;
2. as the owner through `PgVectorIndex`: the transaction and `SET LOCAL` of the project, no policy;
3. as the runtime role through `PgVectorIndex`: transaction, `SET LOCAL` and the policies (what runs now).
(2) - (1) is the cost of the round trips, (3) - (2) the cost of the policies. Each search is checked to
return the same chunks in all three ways.

Usage (an embedded data folder that `scripts/bench_query.py` already ingested, e.g. SciFact as `scifact`):
    .venv/bin/python scripts/bench_row_level_security.py --data-dir DIR --project scifact --searches 300
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import text

from app.domain.models import Filters
from app.engines.embedded_postgres import EmbeddedPostgres
from app.engines.pgvector import PgVectorIndex, create_postgres_engine
from app.engines.postgres_roles import ensure_runtime_role
from app.engines.postgres_rows import vector_literal
from app.engines.postgres_sql import filter_sql, nearest_search_sql

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from sqlalchemy.ext.asyncio import AsyncEngine

TOP_K = 50
WARM_UP_SEARCHES = 20
DIMENSIONS = 384


async def autocommit_search(engine: AsyncEngine, embedding: list[float], filters: Filters) -> list[str]:
    parameters: dict[str, object] = {"embedding": vector_literal(embedding), "top_k": TOP_K}
    statement = nearest_search_sql(filter_sql(filters, parameters))
    async with engine.connect() as plain_connection:
        connection = await plain_connection.execution_options(isolation_level="AUTOCOMMIT")
        return [row.chunk_id for row in await connection.execute(text(statement), parameters)]


async def run(data_dir: Path, project_id: str, searches: int) -> None:
    server = EmbeddedPostgres(data_dir / "postgres")
    owner_url = server.start()
    owner = create_postgres_engine(owner_url, pool_size=1)
    runtime = create_postgres_engine(await ensure_runtime_role(owner_url), pool_size=1)
    filters = Filters(project_id=project_id)
    owner_index, runtime_index = PgVectorIndex(owner), PgVectorIndex(runtime)

    async def through(index: PgVectorIndex, embedding: list[float]) -> list[str]:
        return [hit.chunk_id for hit in await index.search(embedding, top_k=TOP_K, filters=filters)]

    ways: dict[str, Callable[[list[float]], Awaitable[list[str]]]] = {
        "owner, one autocommit statement (before)": lambda e: autocommit_search(owner, e, filters),
        "owner, transaction + SET LOCAL (no policy)": lambda e: through(owner_index, e),
        "runtime role, transaction + SET LOCAL + policies": lambda e: through(runtime_index, e),
    }
    generator = random.Random(7)
    embeddings = [[generator.gauss(0, 1) for _ in range(DIMENSIONS)] for _ in range(searches + WARM_UP_SEARCHES)]
    timings_ms: dict[str, list[float]] = {name: [] for name in ways}
    try:
        for number, embedding in enumerate(embeddings):
            answers = []
            for name, search in ways.items():
                started = time.perf_counter()
                answers.append(await search(embedding))
                if number >= WARM_UP_SEARCHES:
                    timings_ms[name].append((time.perf_counter() - started) * 1000)
            if answers[0] != answers[1] or answers[1] != answers[2]:
                message = f"the three ways answered differently for search {number}"
                raise SystemExit(message)
    finally:
        await owner.dispose()
        await runtime.dispose()
        server.stop()
    print(f"{searches} filtered top-{TOP_K} searches of project {project_id!r}, interleaved")
    for name, values in timings_ms.items():
        ordered = sorted(values)
        p95 = ordered[int(len(ordered) * 0.95)]
        print(f"{name:50s} p50 {statistics.median(ordered):7.2f} ms  p95 {p95:7.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, required=True, help="POIMEN_DATA_DIR holding postgres/")
    parser.add_argument("--project", default="scifact", help="project whose chunks are searched")
    parser.add_argument("--searches", type=int, default=300, help="timed searches per way")
    arguments = parser.parse_args()
    asyncio.run(run(arguments.data_dir, arguments.project, arguments.searches))


if __name__ == "__main__":
    main()
