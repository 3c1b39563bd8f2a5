"""How long migration 0008 (tag keys) takes: a fresh embedded PostgreSQL at 0007 holding `--chunks` chunks
(random 384-dimensional vectors, ten per document, each tagged `--tag`), then migrated to head. With
`--c-locale` in a database created with `LC_CTYPE 'C'`, as CloudNativePG creates them by default.

Usage:
    .venv/bin/python scripts/bench_tag_keys_migration.py --chunks 20000 --tag École --c-locale
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from alembic import command
from sqlalchemy import make_url, text
from sqlalchemy.ext.asyncio import create_async_engine

from app.engines.embedded_postgres import EmbeddedPostgres
from app.engines.migrate import alembic_config

DOCUMENTS = (
    "INSERT INTO documents (project_id, document_id, source, title, content_hash, tags) "
    "SELECT 'p', 'd' || i, 's', 't', 'h', ARRAY[CAST(:tag AS text)] FROM generate_series(1, :documents) AS i"
)
CHUNKS = (
    "INSERT INTO chunks (project_id, chunk_id, document_id, text, source, level, section_title, position, tags, "
    "chunk_hash, embedding, embedding_model) SELECT 'p', 'c' || i, 'd' || (1 + i % :documents), "
    "repeat('word ', 60), 's', 'L0', '', 0, ARRAY[CAST(:tag AS text)], 'h', "
    "CAST(ARRAY(SELECT random() + i * 0 FROM generate_series(1, 384)) AS vector), 'm' "
    "FROM generate_series(1, :chunks) AS i"
)


async def c_locale_database(url: str) -> str:
    engine = create_async_engine(url, isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as connection:
            await connection.execute(text("CREATE DATABASE c_locale TEMPLATE template0 LC_COLLATE 'C' LC_CTYPE 'C'"))
    finally:
        await engine.dispose()
    return make_url(url).set(database="c_locale").render_as_string(hide_password=False)


async def fill(url: str, chunks: int, tag: str) -> None:
    engine = create_async_engine(url)
    try:
        async with engine.begin() as connection:
            await connection.execute(text("SELECT set_config('poimen.scope', 'all_projects', true)"))
            parameters = {"documents": max(1, chunks // 10), "chunks": chunks, "tag": tag}
            await connection.execute(text(DOCUMENTS), parameters)
            await connection.execute(text(CHUNKS), parameters)
    finally:
        await engine.dispose()


def main(chunks: int, tag: str, *, c_locale: bool) -> None:
    with tempfile.TemporaryDirectory() as folder:
        server = EmbeddedPostgres(Path(folder) / "pg")
        url = server.start()
        try:
            if c_locale:
                url = asyncio.run(c_locale_database(url))
            config = alembic_config(url, embedding_dimensions=384)
            command.upgrade(config, "0007")
            started = time.perf_counter()
            asyncio.run(fill(url, chunks, tag))
            print(f"insert {chunks} chunks tagged {tag!r}: {time.perf_counter() - started:.1f} s")
            started = time.perf_counter()
            command.upgrade(config, "head")
            print(f"migration to head: {time.perf_counter() - started:.1f} s")
        finally:
            server.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=20_000)
    parser.add_argument("--tag", default="Ops")
    parser.add_argument("--c-locale", action="store_true", help="migrate a database whose LC_CTYPE is C")
    arguments = parser.parse_args()
    main(arguments.chunks, arguments.tag, c_locale=arguments.c_locale)
