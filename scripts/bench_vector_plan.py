"""Vector search per tenant size in a shared table: the plan the service picks against either plan forced.

Needs a folder `scripts/bench_scale.py run --sizes 100000 --keep` left (`.cache/bench-scale/data-100000`:
one project `scale` of 100,000 chunks, 10 per document). Steps:

1. Adds tenant projects beside it, each a copy of randomly chosen `scale` documents (their chunks and
   vectors) under another project id: `--tenants 5,100,1000` documents give projects of 50, 1,000 and
   10,000 chunks (a table of 111,050 chunks). Copies are reused when present; `--drop-tenants` removes
   them at the end (and with nothing measured, only removes them).
2. For each project, `--queries` vectors of `scale` chunks (the same for every project and plan): the
   exact top 50 (no index), then, on the service's runtime role and project-scoped transactions,
   - `chosen`: `PgVectorIndex.search`, the plan the service picks (`app/engines/vector_plan.py`);
   - `graph`: the HNSW statement the service sends when it picks the graph (`nearest_search_sql`);
   - `exact`: the exact statement (`exact_search_sql`);
   mean milliseconds per search (after a warm-up of 5) and recall@50 against the exact top 50.
3. Prints a table and writes `--json`.

    .venv/bin/python scripts/bench_vector_plan.py --json docs/benchmarks/vector-plan.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import asyncpg

from app.domain.models import Filters
from app.engines.embedded_postgres import EmbeddedPostgres
from app.engines.pgvector import PgVectorIndex, create_postgres_engine
from app.engines.postgres_driver import fetch, project_read
from app.engines.postgres_roles import ensure_runtime_role
from app.engines.postgres_rows import vector_literal
from app.engines.postgres_sql import exact_search_sql, filter_sql, nearest_search_sql

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scale_corpus import recall_at_k

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from sqlalchemy.ext.asyncio import AsyncEngine

REPOSITORY = Path(__file__).resolve().parents[1]
DEFAULT_FOLDER: Final = REPOSITORY / ".cache" / "bench-scale" / "data-100000"
BIG_PROJECT: Final = "scale"
TOP_K: Final = 50
EF_SEARCH: Final = 100
WARM_UP: Final = 5
COPIED_TABLES: Final = ("documents", "chunks")


def tenant_name(documents: int) -> str:
    return f"tenant-{documents}docs"


async def add_tenants(connection: asyncpg.Connection, document_counts: Sequence[int]) -> None:
    """Copy `n` random documents of the big project into project `tenant_name(n)`, for each n not there yet."""
    await connection.execute("SET poimen.scope = 'all_projects'")  # the owner, past row-level security
    for count in document_counts:
        name = tenant_name(count)
        if await connection.fetchval("SELECT count(*) FROM documents WHERE project_id = $1", name):
            continue
        picked = [
            row[0]
            for row in await connection.fetch(
                "SELECT document_id FROM documents WHERE project_id = $1 ORDER BY random() LIMIT $2", BIG_PROJECT, count
            )
        ]
        for table in COPIED_TABLES:
            columns = [
                row[0]
                for row in await connection.fetch(
                    "SELECT column_name FROM information_schema.columns WHERE table_name = $1 "
                    "AND is_generated = 'NEVER' ORDER BY ordinal_position",
                    table,
                )
            ]
            chosen = ", ".join("$1" if column == "project_id" else column for column in columns)
            await connection.execute(
                f"INSERT INTO {table} ({', '.join(columns)}) SELECT {chosen} FROM {table} "  # noqa: S608 - our names
                "WHERE project_id = $2 AND document_id = ANY($3::text[])",
                name,
                BIG_PROJECT,
                picked,
            )
    await connection.execute("ANALYZE chunks")


async def drop_tenants(connection: asyncpg.Connection) -> None:
    await connection.execute("SET poimen.scope = 'all_projects'")
    for table in ("chunks", "lexical_outbox", "documents", "project_generations"):
        await connection.execute(f"DELETE FROM {table} WHERE project_id LIKE 'tenant-%'")  # noqa: S608 - constant
    await connection.execute("VACUUM ANALYZE chunks")


async def timed_statement(
    engine: AsyncEngine,
    statement_of: Callable[[str], str],
    project: str,
    vectors: Sequence[list[float]],
) -> tuple[float, list[list[str]]]:
    """Mean ms per search and the chunk ids found, for one statement kind on the service's transactions."""
    filters = Filters(project_id=project)
    found: list[list[str]] = []
    elapsed = 0.0
    for position, vector in enumerate([*vectors[:WARM_UP], *vectors]):
        parameters: dict[str, object] = {"embedding": vector_literal(vector), "top_k": TOP_K}
        statement = statement_of(filter_sql(filters, parameters))
        started = time.perf_counter()
        async with project_read(engine, [project]) as connection:
            rows = await fetch(connection, statement, parameters)
        if position >= WARM_UP:
            elapsed += time.perf_counter() - started
            found.append([row["chunk_id"] for row in rows])
    return elapsed * 1000 / len(vectors), found


async def timed_service(
    index: PgVectorIndex, project: str, vectors: Sequence[list[float]]
) -> tuple[float, list[list[str]]]:
    filters = Filters(project_id=project)
    for vector in vectors[:WARM_UP]:
        await index.search(vector, top_k=TOP_K, filters=filters)
    started = time.perf_counter()
    found = [[hit.chunk_id for hit in await index.search(vector, top_k=TOP_K, filters=filters)] for vector in vectors]
    return (time.perf_counter() - started) * 1000 / len(vectors), found


async def measure(arguments: argparse.Namespace) -> dict[str, Any]:
    postgres = EmbeddedPostgres(arguments.folder / "postgres")
    owner_url = postgres.start()
    try:
        owner = await asyncpg.connect(owner_url.replace("postgresql+asyncpg://", "postgresql://"))
        try:
            if arguments.drop_tenants and not arguments.tenants:
                await drop_tenants(owner)
                return {}
            await add_tenants(owner, arguments.tenants)
            vectors = [
                [float(value) for value in row[0][1:-1].split(",")]
                for row in await owner.fetch(
                    "SELECT CAST(embedding AS text) FROM chunks WHERE project_id = $1 ORDER BY random() LIMIT $2",
                    BIG_PROJECT,
                    arguments.queries,
                )
            ]
            sizes = {
                row[0]: int(row[1])
                for row in await owner.fetch("SELECT project_id, count(*) FROM chunks GROUP BY project_id")
            }
            projects = sorted(sizes, key=sizes.__getitem__)
            exact: dict[str, list[list[str]]] = {}
            await owner.execute("SET enable_indexscan = off")
            for project in projects:
                exact[project] = [
                    [
                        row[0]
                        for row in await owner.fetch(
                            "SELECT chunk_id FROM chunks WHERE project_id = $1 "
                            "ORDER BY embedding <=> CAST($2 AS vector), chunk_id LIMIT $3",
                            project,
                            vector_literal(vector),
                            TOP_K,
                        )
                    ]
                    for vector in vectors
                ]
        finally:
            await owner.close()
        engine = create_postgres_engine(await ensure_runtime_role(owner_url), pool_size=2, hnsw_ef_search=EF_SEARCH)
        rows = []
        try:
            index = PgVectorIndex(engine, ef_search=EF_SEARCH)
            for project in projects:
                row: dict[str, Any] = {"project": project, "chunks": sizes[project]}
                for label, timing in (
                    ("chosen", timed_service(index, project, vectors)),
                    ("graph", timed_statement(engine, nearest_search_sql, project, vectors)),
                    ("exact", timed_statement(engine, exact_search_sql, project, vectors)),
                ):
                    milliseconds, found = await timing
                    row[label] = {
                        "ms": round(milliseconds, 2),
                        "recall_at_50": round(recall_at_k(found, exact[project], k=TOP_K), 3),
                    }
                rows.append(row)
                print(
                    f"{project:<22} {sizes[project]:>8,} chunks  "
                    + "  ".join(
                        f"{label} {row[label]['ms']:6.2f} ms r@50 {row[label]['recall_at_50']:.3f}"
                        for label in ("chosen", "graph", "exact")
                    ),
                    flush=True,
                )
        finally:
            await engine.dispose()
        if arguments.drop_tenants:
            owner = await asyncpg.connect(owner_url.replace("postgresql+asyncpg://", "postgresql://"))
            try:
                await drop_tenants(owner)
            finally:
                await owner.close()
    finally:
        postgres.stop()
    return {
        "machine": f"{platform.machine()}, {platform.python_implementation()} {platform.python_version()}",
        "table_chunks": sum(sizes.values()),
        "queries": arguments.queries,
        "top_k": TOP_K,
        "ef_search": EF_SEARCH,
        "projects": rows,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", type=Path, default=DEFAULT_FOLDER, help="a folder `bench_scale.py run --keep` left")
    parser.add_argument(
        "--tenants",
        type=lambda text: [int(part) for part in text.split(",") if part],
        default=[5, 100, 1000],
        help="documents per added tenant, comma-separated ('' adds none)",
    )
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--drop-tenants", action="store_true", help="remove the added tenants at the end")
    parser.add_argument("--json", type=Path, default=None)
    arguments = parser.parse_args(argv)
    if not (arguments.folder / "postgres").is_dir():
        print(
            f"no {arguments.folder}/postgres: run `scripts/bench_scale.py run --sizes 100000 --keep` first",
            file=sys.stderr,
        )
        return 2
    result = asyncio.run(measure(arguments))
    if arguments.json is not None and result:
        arguments.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {arguments.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
