"""What listing the projects costs: `SELECT DISTINCT project_id` against the loose index scan now used.

Fills a fresh embedded PostgreSQL with `--documents` document rows (no chunks) spread over `--projects`
projects, then times each statement `--repeats` times, interleaved, and checks both list the same ids.

Usage:
    .venv/bin/python scripts/bench_project_ids.py --documents 500000 --projects 200
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from app.engines.embedded_postgres import EmbeddedPostgres
from app.engines.migrate import run_migrations_async
from app.engines.postgres_sql import PROJECT_IDS

DISTINCT = "SELECT DISTINCT project_id FROM documents ORDER BY project_id"
FILL = (
    "INSERT INTO documents (project_id, document_id, source, title, content_hash) "
    "SELECT 'p' || (i % :projects), 'd' || i, 's', 't', 'h' FROM generate_series(1, :documents) AS i"
)
MAINTENANCE = "SELECT set_config('poimen.scope', 'all_projects', true)"


async def main(documents: int, projects: int, repeats: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        server = EmbeddedPostgres(Path(folder) / "pg")
        url = server.start()
        try:
            await run_migrations_async(url, embedding_dimensions=384)
            engine = create_async_engine(url)
            async with engine.begin() as connection:
                await connection.execute(text(MAINTENANCE))
                await connection.execute(text(FILL), {"projects": projects, "documents": documents})
                await connection.execute(text("ANALYZE documents"))
            timings: dict[str, list[float]] = {"distinct": [], "loose index scan": []}
            listed: dict[str, list[str]] = {}
            for _ in range(repeats):
                for name, statement in (("distinct", DISTINCT), ("loose index scan", PROJECT_IDS)):
                    async with engine.begin() as connection:
                        await connection.execute(text(MAINTENANCE))
                        started = time.perf_counter()
                        listed[name] = [row[0] for row in await connection.execute(text(statement))]
                        timings[name].append((time.perf_counter() - started) * 1000)
            await engine.dispose()
        finally:
            server.stop()
    if listed["distinct"] != listed["loose index scan"]:
        print("the two statements list different projects")
        raise SystemExit(1)
    print(f"{documents} documents, {projects} projects, {repeats} runs each (median ms):")
    for name, values in timings.items():
        print(f"  {name:<17} {statistics.median(values):8.1f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--documents", type=int, default=500_000)
    parser.add_argument("--projects", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=7)
    arguments = parser.parse_args()
    asyncio.run(main(arguments.documents, arguments.projects, arguments.repeats))
